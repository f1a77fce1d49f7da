#!/usr/bin/env python3
"""Writes the default model in the quantization types users download.

The default model (SmolLM2-135M-Instruct, Q4_1) is converted to F32
(tools/gguf_convert.py: every value exact), then llama.cpp's own quantizer
(llama_model_quantize through llama-cpp-python) writes one file per type in
TYPES, into OUT_DIR as smollm2-<type>.gguf. Files already there are kept.

SmolLM2's rows of 576 are not whole K-quant super-blocks (256), so llama.cpp
writes those matrices in its fallback types (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K
-> Q8_0, Q2_K / Q3_K -> IQ4_NL) and only the FFN's down projection (rows of
1536) in the K-quants: the files are what a user gets from llama.cpp.

The quantizer is ggml's portable reference code, so every machine writes the
same bytes; make_kquant_golden.py records a fingerprint of each file (two sums
over its 64-bit words), which //tests/golden:kquant_golden_test checks.

Usage (llama-cpp-python's interpreter; scripts/setup.sh makes
~/.cache/braid/llama-venv):
  tools/golden/kquant_models.py [OUT_DIR [MODEL.gguf]]
Prints OUT_DIR.
"""
import ctypes
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> llama_ftype (llama.h's LLAMA_FTYPE_MOSTLY_*)
TYPES = {
    "q4_k_m": 15,
    "q5_k_m": 17,
    "q6_k": 18,
    "q3_k_m": 12,
    "q2_k": 10,
    "q5_0": 8,
    "q5_1": 9,
    "q8_0": 7,
}


def default_model():
    return os.path.join(os.environ.get("BRAID_CACHE", os.path.expanduser(
        "~/.cache/braid")), "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def fingerprint(path):
    """Two sums over the file as little-endian 64-bit words (zero-padded):
    of the words and of (1-based index) x word, mod 2^64 (the C++ test
    computes the same)."""
    import numpy as np
    data = np.fromfile(path, dtype=np.uint8)
    data = np.concatenate([data, np.zeros((-len(data)) % 8, np.uint8)])
    words = data.view("<u8")
    index = np.arange(1, len(words) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(words.sum(dtype=np.uint64)), int((words * index).sum(dtype=np.uint64))


def model_path(out_dir, name):
    return os.path.join(out_dir, "smollm2-%s.gguf" % name)


def make(out_dir, model):
    import llama_cpp  # llama-cpp-python
    os.makedirs(out_dir, exist_ok=True)
    f32 = os.path.join(out_dir, "smollm2-f32.gguf")
    if not os.path.exists(f32):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "gguf_convert.py"),
                        model, f32 + ".tmp", "f32"], check=True)
        os.replace(f32 + ".tmp", f32)
    for name, ftype in TYPES.items():
        path = model_path(out_dir, name)
        if os.path.exists(path):
            continue
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = 2
        rc = llama_cpp.llama_model_quantize(f32.encode(), (path + ".tmp").encode(),
                                            ctypes.byref(params))
        if rc != 0:
            sys.exit("llama_model_quantize %s failed: %d" % (name, rc))
        os.replace(path + ".tmp", path)
    return out_dir


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(default_model()), "kquant")
    model = sys.argv[2] if len(sys.argv) > 2 else default_model()
    print(make(out_dir, model))


if __name__ == "__main__":
    main()
