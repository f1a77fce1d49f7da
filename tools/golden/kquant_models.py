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

The default model's files hold few true K-quant matrices (and no Q2_K one),
so the same quantizer also writes RAND_TYPES of arch_models.py's random
Llama 3 model, whose rows (256, 512) are whole super-blocks: every matrix of
rand-q2_k is Q2_K or Q3_K, of rand-q4_k_m Q4_K or Q6_K, and so on.

Usage (llama-cpp-python's interpreter; scripts/llama_venv.sh makes
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


# name -> llama_ftype, of arch_models.py's "llama3" model.
RAND_TYPES = {
    "rand-q2_k": 10,
    "rand-q3_k_m": 12,
    "rand-q4_k_m": 15,
    "rand-q5_k_m": 17,
    "rand-q6_k": 18,
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
    if name.startswith("rand-"):
        return os.path.join(out_dir, "%s.gguf" % name)
    return os.path.join(out_dir, "smollm2-%s.gguf" % name)


def quantize(src, dst, ftype):
    import llama_cpp  # llama-cpp-python
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), (dst + ".tmp").encode(),
                                        ctypes.byref(params))
    if rc != 0:
        sys.exit("llama_model_quantize %s failed: %d" % (dst, rc))
    os.replace(dst + ".tmp", dst)


def make(out_dir, model):
    os.makedirs(out_dir, exist_ok=True)
    f32 = os.path.join(out_dir, "smollm2-f32.gguf")
    if not os.path.exists(f32):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "gguf_convert.py"),
                        model, f32 + ".tmp", "f32"], check=True)
        os.replace(f32 + ".tmp", f32)
    for name, ftype in TYPES.items():
        if not os.path.exists(model_path(out_dir, name)):
            quantize(f32, model_path(out_dir, name), ftype)
    sys.path.insert(0, HERE)
    import arch_models
    # The architecture models' own folder beside OUT_DIR ($CACHE/models/arch,
    # scripts/test.sh's BRAID_ARCH_DIR): one copy of the random Llama 3.
    rand_dir = os.path.join(os.path.dirname(os.path.abspath(out_dir)), "arch")
    arch_models.make(rand_dir, model)
    for name, ftype in RAND_TYPES.items():
        if not os.path.exists(model_path(out_dir, name)):
            quantize(arch_models.model_path(rand_dir, "llama3"),
                     model_path(out_dir, name), ftype)
    return out_dir


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(default_model()), "kquant")
    model = sys.argv[2] if len(sys.argv) > 2 else default_model()
    print(make(out_dir, model))


if __name__ == "__main__":
    main()
