#!/usr/bin/env bash
# Assembles the runtime image's root filesystem without a container engine:
# Debian 12's minbase (debootstrap) with the shared libraries braidd links
# (runtime-packages.txt), braidd itself, a non-root user (10001) and the
# mount points the Kubernetes manifests use (/models, /etc/braid). The same
# content as the Dockerfile beside it. Given a braidd built with
# --config=cuda, it is the GPU image's: the CUDA runtime libraries that
# braidd links (libcudart, libcublas, libcublasLt, from the installed
# toolkit) go to /usr/local/cuda/lib64, on the loader's path, as
# Dockerfile.cuda installs them from NVIDIA's Debian 12 packages; the
# driver's libcuda comes from the host at run time (the NVIDIA container
# toolkit mounts it).
#
#   deploy/image/build_rootfs.sh ROOTFS [BRAIDD]   # BRAIDD: bazel-bin/server/braidd
#   deploy/image/build_rootfs.sh ROOTFS bazel-out/k8-fastbuildcuda/bin/server/braidd  # GPU
#
# The debootstrapped base is cached under $BRAID_CACHE/image (keyed by the
# package list), so a rebuild downloads nothing. Needs root (debootstrap).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOTFS="${1:?usage: build_rootfs.sh ROOTFS [BRAIDD]}"
BRAIDD="${2:-bazel-bin/server/braidd}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${BRAID_CACHE:-${XDG_CACHE_HOME:-${HOME:-/var/tmp}/.cache}/braid}/image"

for tool in debootstrap tar; do
  command -v "$tool" >/dev/null || {
    echo "build_rootfs: $tool is missing: apt-get install $tool (scripts/setup.sh)" >&2
    exit 1
  }
done
[ -x "$BRAIDD" ] || { echo "build_rootfs: no braidd at $BRAIDD: bazel build //server:braidd" >&2; exit 1; }

packages="$(grep -v '^#' "$HERE/runtime-packages.txt" | paste -sd, -)"
key="$(printf '%s %s' "$packages" "$MIRROR" | sha256sum | cut -c1-16)"
base="$CACHE/bookworm-minbase-$key.tar"
mkdir -p "$CACHE"
if [ ! -f "$base" ]; then
  tmp="$(mktemp -d)"
  echo "build_rootfs: debootstrap bookworm minbase + $packages" >&2
  debootstrap --variant=minbase --include="$packages" bookworm "$tmp/root" "$MIRROR" >&2
  # Slim: no package caches, documentation or locales.
  rm -rf "$tmp/root"/var/cache/apt/* "$tmp/root"/var/lib/apt/lists/* \
    "$tmp/root"/usr/share/doc/* "$tmp/root"/usr/share/man/* \
    "$tmp/root"/usr/share/locale/* "$tmp/root"/usr/share/info/*
  tar -C "$tmp/root" --numeric-owner -cf "$base.tmp" .
  mv "$base.tmp" "$base"
  rm -rf "$tmp"
fi

rm -rf "$ROOTFS"
mkdir -p "$ROOTFS"
tar -C "$ROOTFS" --numeric-owner -xf "$base"
install -m 0755 "$BRAIDD" "$ROOTFS/usr/local/bin/braidd"
echo "braid:x:10001:10001:braidd:/nonexistent:/usr/sbin/nologin" >> "$ROOTFS/etc/passwd"
echo "braid:x:10001:" >> "$ROOTFS/etc/group"
mkdir -p "$ROOTFS/models" "$ROOTFS/etc/braid"
libs="$(ldd "$BRAIDD")"
if grep -q 'libcudart\.so' <<<"$libs"; then
  missing="$(awk '/lib(cudart|cublas|cublasLt)\.so.*not found/ {print $1}' <<<"$libs")"
  [ -z "$missing" ] || { echo "build_rootfs: $BRAIDD needs $missing: install the CUDA toolkit (TOOLCHAIN.md)" >&2; exit 1; }
  mkdir -p "$ROOTFS/usr/local/cuda/lib64"
  awk '$1 ~ /^lib(cudart|cublas|cublasLt)\.so/ {print $1, $3}' <<<"$libs" |
    while read -r name path; do cp -L "$path" "$ROOTFS/usr/local/cuda/lib64/$name"; done
  echo /usr/local/cuda/lib64 > "$ROOTFS/etc/ld.so.conf.d/cuda.conf"
  ldconfig -r "$ROOTFS"
fi
echo "build_rootfs: $ROOTFS ($(du -sh "$ROOTFS" | cut -f1))" >&2
