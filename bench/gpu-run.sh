#!/usr/bin/env bash
# On a bare GPU machine (no network, no Node), in the checkout's root with .gpu-bundle/ from bench/gpu-bundle.sh:
# unpack Node, the runtime dependencies, dist/ and the Vulkan loader once, point Dawn at the NVIDIA driver's
# Vulkan ICD where it has one, then run "$@" (e.g. node dist/bench/gpu.bench.js).
set -uo pipefail
cd "$(dirname "$0")/.."
pack=.gpu-bundle
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,sys,shutil;shutil.copyfileobj(lzma.open(sys.argv[1]),sys.stdout.buffer)" "$1"; }
if [ ! -x /tmp/rlvr-node/node ]; then
  for f in "$pack"/*.deb; do dpkg -x "$f" /; done
  ldconfig
  mkdir -p /tmp/rlvr-node && unxz "$pack/node.xz" > /tmp/rlvr-node/node && chmod +x /tmp/rlvr-node/node
fi
[ -d node_modules/webgpu ] || unxz "$pack/node_modules.tar.xz" | tar xf -
[ -f dist/bench/gpu.bench.js ] || unxz "$pack/dist.tar.xz" | tar xf -
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES=$icd
export PATH=/tmp/rlvr-node:$PATH
echo "node $(node --version); $(nvidia-smi -L 2>/dev/null | head -1)"
"$@"
