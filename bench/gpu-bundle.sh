#!/usr/bin/env bash
# Pack what a bare GPU machine without network or Node needs to run bench:gpu (or any benchmark or example that
# runs from dist/): Node (the current LTS of .ci/node.sh), the runtime dependencies (webgpu's Linux x86-64 Dawn
# alone), the built dist/ and the Vulkan loader packages, into .gpu-bundle/ (about 36 MB; ignore it in git).
# Then copy the checkout with .gpu-bundle/ to the GPU machine and, in its root: bash bench/gpu-run.sh COMMAND
#   e.g.  bash bench/gpu-run.sh node dist/bench/gpu.bench.js --variants base,every-cut
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/node.sh
node_bin=$(node_dir "$NODE_LTS")/node
[ -d node_modules ] || { echo "run .ci/setup (npm ci) first" >&2; exit 1; }
"$node_bin" esbuild.config.mjs >/dev/null
out=.gpu-bundle
mkdir -p "$out" && rm -f "$out"/*.tar.xz "$out"/*.deb
[ "$out/node.xz" -nt "$node_bin" ] || xz -T0 -9 -c "$node_bin" > "$out/node.xz"
# The runtime dependencies (npm of any version lists them).
deps=$(npm ls --omit=dev --parseable --all 2>/dev/null | sed "s#^$PWD/##" | grep '^node_modules/' | sort -u)
[ -n "$deps" ] || { echo "npm ls found no runtime dependencies" >&2; exit 1; }
# shellcheck disable=SC2086
tar cf - --exclude='node_modules/webgpu/dist/darwin-*' --exclude='node_modules/webgpu/dist/win32-*' \
  --exclude='node_modules/webgpu/dist/linux-arm64' --exclude='node_modules/webgpu/build' --exclude='*.map' \
  --exclude='node_modules/fp-ts/src' --exclude='node_modules/fp-ts/es6' $deps | xz -T0 -9 > "$out/node_modules.tar.xz"
tar cf - --exclude='*.map' --exclude='dist/browser' --exclude='dist/spec-browser' --exclude='dist/types' dist |
  xz -T0 -9 > "$out/dist.tar.xz"
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-bundle-apt'
mkdir -p /tmp/gpu-bundle-apt/partial
apt-get $o update >/dev/null 2>&1 || true
(cd "$out" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null)
du -sh "$out"
