#!/usr/bin/env python3
"""Writes a model too big for any last-level cache, for benchmarks.

A random-weight GGUF with Llama-3.2-1B's shape (n_embd 2048, n_ff 8192, 16
layers, 32 heads, 8 KV heads, Llama 3's rope_freqs; the default model's
vocabulary of 49,152 so that both engines load it: about 1.07 B parameters),
written in F16, then quantized by llama.cpp's own quantizer to each requested
type (default Q4_K_M, about 0.65 GB; Q4_1 and Q8_0 are the other usual ones):
one decode step reads the whole file, so one stream waits on DRAM as it does
with the real models users serve.

Usage (llama-cpp-python's interpreter, scripts/llama_venv.sh):
  tools/bench/make_dram_model.py [--out DIR] [--types q4_k_m,q8_0,q4_1]
Prints the files' paths.
"""
import argparse
import ctypes
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import arch_models  # noqa: E402

SHAPE = dict(n_embd=2048, n_ff=8192, n_layer=16, n_head=32, n_head_kv=8)
FTYPES = {"q4_k_m": 15, "q8_0": 7, "q4_1": 3, "q4_0": 2, "q6_k": 18,
          "q5_k_m": 17}


def write_f16(path, tokenizer_src):
    n_embd, n_ff = SHAPE["n_embd"], SHAPE["n_ff"]
    n_head, n_head_kv = SHAPE["n_head"], SHAPE["n_head_kv"]
    head_dim = n_embd // n_head
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(path + ".tmp", "llama")
    n_vocab = arch_models.copy_tokenizer(tokenizer_src, w)
    w.add_context_length(8192)
    w.add_embedding_length(n_embd)
    w.add_block_count(SHAPE["n_layer"])
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)

    def mat(rows, cols, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(cols)
        out = np.empty((rows, cols), np.float16)
        for r in range(0, rows, 1024):  # in slices: bounded float64 memory
            n = min(1024, rows - r)
            out[r:r + n] = (rng.standard_normal((n, cols), np.float32) * s)
        return out

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd, 1.0))
    w.add_tensor("output_norm.weight", norm(n_embd))
    ramp = np.clip((np.arange(head_dim // 2) - 8) / 16.0, 0, 1)
    w.add_tensor("rope_freqs.weight", (1 + 7 * ramp).astype(np.float32))
    for il in range(SHAPE["n_layer"]):
        p = "blk.%d." % il
        w.add_tensor(p + "attn_norm.weight", norm(n_embd))
        w.add_tensor(p + "attn_q.weight", mat(n_head * head_dim, n_embd))
        w.add_tensor(p + "attn_k.weight", mat(n_head_kv * head_dim, n_embd))
        w.add_tensor(p + "attn_v.weight", mat(n_head_kv * head_dim, n_embd))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_head * head_dim))
        w.add_tensor(p + "ffn_norm.weight", norm(n_embd))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(
        arch_models.default_model()), "dram"))
    ap.add_argument("--types", default="q4_k_m")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    f16 = os.path.join(args.out, "llama1b-f16.gguf")
    if not os.path.exists(f16):
        write_f16(f16, gguf.GGUFReader(arch_models.default_model()))
    import llama_cpp
    for name in args.types.split(","):
        path = os.path.join(args.out, "llama1b-%s.gguf" % name)
        if not os.path.exists(path):
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = FTYPES[name]
            params.nthread = 2
            rc = llama_cpp.llama_model_quantize(
                f16.encode(), (path + ".tmp").encode(), ctypes.byref(params))
            if rc != 0:
                sys.exit("llama_model_quantize %s failed: %d" % (name, rc))
            os.replace(path + ".tmp", path)
        print(path)


if __name__ == "__main__":
    main()
