#!/usr/bin/env bash
# Installs the Debian packages brickfs needs to build and test, and only
# those that are missing. Called by `make` (once, then a stamp file) and by
# .ci/run. Needs root (or sudo) only when something is missing.
set -euo pipefail

PKGS=(
  gcc make pkg-config python3 perl         # toolchain, code generator, prove
  clang libclang-rt-14-dev                 # libFuzzer and sanitizer runtimes
  libfuse3-dev fuse3                       # FUSE client
  libjson-c-dev                            # JSON for stats and the REST API
  libmicrohttpd-dev                        # brickfsd's HTTP server (the REST API)
  libcurl4-openssl-dev                     # the brickfs CLI's and brickfsd's HTTP client
  etcd-server etcd-client                  # the pool store (tests run a real etcd; etcdctl)
  libisal-dev                              # Intel ISA-L: Reed-Solomon erasure coding (src/ec)
  libssl-dev                               # libcrypto SHA-256: rchecksum (replicate's heal)
  attr acl util-linux procps psmisc        # getfattr/setfattr, setfacl, setpriv, pgrep
  iproute2                                 # network namespaces in fault tests
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing missing packages: ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
