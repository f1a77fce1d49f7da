#!/usr/bin/env python3
"""Writes a copy of a GGUF with its quantized matrices in another type.

Every Q4_0, Q4_1 and Q8_0 tensor is dequantized (ggml's formulas: d * (q - 8),
d * q + m, d * q; each value exact in f32) and written as F16, BF16 or F32
(rounded to nearest even), or quantized again to Q4_0 or Q8_0 (ggml's
reference quantizers); every other tensor and all metadata are copied
unchanged. For benchmarks and tests of other weight types' paths on the
real model, e.g.

  python3 tools/gguf_convert.py ~/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      /tmp/smollm2-f16.gguf f16

Needs numpy.
"""
import argparse
import struct

import numpy as np

OUT_TYPES = {"f32": 0, "f16": 1, "bf16": 30, "q4_0": 2, "q8_0": 8}
# ggml type id -> (block elements, block bytes)
QUANT = {2: (32, 18), 3: (32, 20), 8: (32, 34)}
PLAIN = {0: 4, 1: 2, 30: 2}  # bytes per element
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8,
                12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v

    def string(self):
        (n,) = self.take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip_value(self, t):
        if t in SCALAR_BYTES:
            self.pos += SCALAR_BYTES[t]
        elif t == 8:
            self.string()
        elif t == 9:
            at, n = self.take("IQ")
            for _ in range(n):
                self.skip_value(at)
        else:
            raise ValueError(f"unknown GGUF value type {t}")


def dequantize(t, raw):
    _, block = QUANT[t]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, block)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    if t == 2:  # Q4_0
        qs = b[:, 2:18]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)
        return (d * (q - 8)).reshape(-1)
    if t == 3:  # Q4_1
        m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
        qs = b[:, 4:20]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)
        return (d * q + m).reshape(-1)
    q = b[:, 2:34].copy().view(np.int8).astype(np.float32)  # Q8_0
    return (d * q).reshape(-1)


def quantize(values, out_type):
    x = values.astype(np.float32).reshape(-1, 32)
    i = np.argmax(np.abs(x), axis=1)  # the first of the largest magnitudes
    if out_type == 2:  # Q4_0: d = max / -8, q = min(15, (int8)(x / d + 8.5))
        d = x[np.arange(len(x)), i] / np.float32(-8)
    else:  # Q8_0: d = amax / 127, q = round(x / d)
        d = np.abs(x[np.arange(len(x)), i]) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0))
    y = x * inv[:, None].astype(np.float32)
    dh = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    if out_type == 2:
        q = np.minimum(15, (y + np.float32(8.5)).astype(np.int8)).astype(
            np.uint8)
        qs = q[:, :16] | (q[:, 16:] << 4)
        return np.concatenate([dh, qs], axis=1).tobytes()
    q = np.round(y).astype(np.int8).view(np.uint8)  # roundf: half away
    q = np.where(np.abs(y - np.trunc(y)) == 0.5,
                 (np.trunc(y) + np.sign(y)).astype(np.int8).view(np.uint8), q)
    return np.concatenate([dh, q], axis=1).tobytes()


def encode(values, out_type):
    if out_type in (2, 8):
        return quantize(values, out_type)
    if out_type == 0:
        return values.astype(np.float32).tobytes()
    if out_type == 1:
        return values.astype(np.float16).tobytes()
    u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def read_gguf(data):
    """(header fields, metadata bytes, tensor infos, data start, alignment)."""
    r = Reader(data)
    magic, version, n_tensors, n_kv = r.take("4sIQQ")
    if magic != b"GGUF":
        raise ValueError("not a GGUF file")
    kv_start, align = r.pos, 32
    for _ in range(n_kv):
        key = r.string()
        (t,) = r.take("I")
        if key == b"general.alignment":
            (align,) = struct.unpack_from("<I", data, r.pos)
        r.skip_value(t)
    kv_bytes = data[kv_start:r.pos]
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        (nd,) = r.take("I")
        dims = r.take(f"{nd}Q")
        t, off = r.take("IQ")
        infos.append((name, dims, t, off))
    base = (r.pos + align - 1) // align * align
    return (magic, version, n_tensors, n_kv), kv_bytes, infos, base, align


def checksum(path, t):
    """Two sums over the 16-bit values of the type-t tensors, in file order:
    of the values, and of (1-based index) x value, both mod 2^64 (the float
    golden test recomputes them on its own conversion)."""
    with open(path, "rb") as f:
        data = f.read()
    _, _, infos, base, _ = read_gguf(data)
    mask = (1 << 64) - 1
    s1 = s2 = i = 0
    for _, dims, tt, o in infos:
        if tt != t:
            continue
        n = int(np.prod(dims))
        v = np.frombuffer(data, dtype=np.uint16, count=n,
                          offset=base + o).astype(np.uint64)
        s1 = (s1 + int(v.sum(dtype=np.uint64))) & mask
        s2 = (s2 + int((np.arange(i + 1, i + n + 1, dtype=np.uint64) *
                        v).sum(dtype=np.uint64))) & mask
        i += n
    return s1, s2


def convert(src, dst, out_name):
    out_type = OUT_TYPES[out_name]
    with open(src, "rb") as f:
        data = f.read()
    (magic, version, n_tensors, n_kv), kv_bytes, infos, base, align = (
        read_gguf(data))

    def pad(n):
        return (n + align - 1) // align * align - n

    out_infos, blobs, off = [], [], 0
    for name, dims, t, o in infos:
        n = int(np.prod(dims))
        if t in QUANT:
            elems, block = QUANT[t]
            raw = data[base + o:base + o + n // elems * block]
            raw, t = encode(dequantize(t, raw), out_type), out_type
        elif t in PLAIN:
            raw = data[base + o:base + o + n * PLAIN[t]]
        else:
            raise ValueError(f"{name.decode()}: unsupported tensor type {t}")
        out_infos.append((name, dims, t, off))
        blobs.append(raw)
        off += len(raw) + pad(len(raw))
    with open(dst, "wb") as f:
        f.write(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv))
        f.write(kv_bytes)
        for name, dims, t, o in out_infos:
            f.write(struct.pack("<Q", len(name)) + name)
            f.write(struct.pack(f"<I{len(dims)}Q", len(dims), *dims))
            f.write(struct.pack("<IQ", t, o))
        f.write(b"\0" * pad(f.tell()))
        for raw in blobs:
            f.write(raw)
            f.write(b"\0" * pad(len(raw)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("type", choices=sorted(OUT_TYPES))
    args = ap.parse_args()
    convert(args.src, args.dst, args.type)
    print(f"wrote {args.dst}")


if __name__ == "__main__":
    main()
