#!/usr/bin/env bash
# Packs what tools/bench/{cpu,session}_bench.py need on another x86-64 Linux
# machine that has python3 (with numpy and jinja2) but no Debian packages,
# no llama-cpp-python and no network: braid's opt binaries with their
# shared libraries, llama-cpp-python's package, and cp312 wheels of grpcio,
# grpcio-tools, grpcio-health-checking and protobuf (the versions in
# `make test`'s venv, $VENV_PY) and diskcache. The model is
# split at SPLIT_BYTES so each part fits a 64 MiB transfer.
# llama-cpp-python goes as it is built here: a -march=native build from a
# CPU with AMX-INT8 takes ggml's AMX path, which crashes (cpu_bench.py's
# NO_AMX_BUILD is the build to pack then), and one from a CPU without
# AVX-512 runs slower kernels on a machine that has it.
#
#   tools/bench/remote/pack.sh A_DIR B_DIR [MODEL] [SPLIT_BYTES]
#
# A_DIR gets stage.tar.xz, whl/ and m1 (the model's first part); B_DIR gets
# m2. On the other machine, from the repository root:
#   A=A_DIR bash tools/bench/remote/setup.sh     (keeps what it needs in $D)
#   B=B_DIR bash tools/bench/remote/run.sh       (prints and tees to $OUT)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
A=$1 B=$2
M=${3:-$HOME/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf}
SPLIT=${4:-42000000}
PY=${PY:-python3}  # the one with llama-cpp-python
VENV_PY=${VENV_PY:-$HOME/.cache/braid/venv/bin/python}
mkdir -p "$A/whl" "$B"
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
(cd "$ROOT" && bazel build -c opt //model/cpu:llama_bench //server:braidd >&2)
mkdir -p "$S/bin" "$S/lib" "$S/py/llama_cpp/lib"
cp "$ROOT"/bazel-out/k8-opt/bin/model/cpu/llama_bench "$ROOT"/bazel-out/k8-opt/bin/server/braidd "$S/bin/"
chmod u+w "$S"/bin/*
# Every shared library but the C and C++ runtimes (newer there).
{ ldd "$S/bin/braidd"; ldd "$S/bin/llama_bench"; } | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E 'lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+)\.so|ld-linux' | xargs -I{} cp -L {} "$S/lib/"
cp -L "$(ldconfig -p | awk '/libgomp.so.1 /{print $NF; exit}')" "$S/lib/"
LC=$("$PY" -c 'import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__))')
(cd "$LC" && find . -maxdepth 1 -name '*.py' -exec cp {} "$S/py/llama_cpp/" \;)
cp -a "$LC"/lib/libggml* "$LC"/lib/libllama* "$S/py/llama_cpp/lib/"
tar -cJf "$A/stage.tar.xz" -C "$S" .
# The gRPC packages at the versions `make test`'s venv holds.
PINS=$("$VENV_PY" -c 'import importlib.metadata as m
print(" ".join(f"{p}=={m.version(p)}" for p in ("grpcio", "grpcio-tools",
      "grpcio-health-checking", "protobuf")))')
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$A/whl" \
  $PINS diskcache
head -c "$SPLIT" "$M" > "$A/m1"
tail -c +"$((SPLIT + 1))" "$M" > "$B/m2"
md5sum "$M"
