#!/usr/bin/env python3
"""Writes small random-weight GGUFs of each architecture braid reads.

No other real weights can be downloaded here, so each architecture is checked
on a model with its real tensor set, norms, biases and metadata but random
weights: ARCHS below. Each file carries the default model's tokenizer (its
tokenizer.* keys, so llama.cpp loads it) and F32 weights (both engines then
differ only in the order of their sums). The weights come from numpy's PCG64
with a fixed seed: every machine writes the same bytes (make_arch_golden.py
records a fingerprint, //tests/golden:arch_golden_test checks it).

Usage: tools/golden/arch_models.py [OUT_DIR [MODEL.gguf]]   (needs numpy, gguf)
Prints OUT_DIR.
"""
import os
import sys

import numpy as np
import gguf

N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD_KV = 256, 512, 2, 4, 2

# name -> (general.architecture, options)
ARCHS = {
    # Llama 3.x: rope_freqs (llama3 scaling as a tensor), untied output.
    "llama3": ("llama", {"rope_freqs": True, "tied": False}),
    # Qwen2 / 2.5: Q/K/V biases, neox RoPE. (Tied embeddings, as in the
    # default model, make a random model repeat its input token.)
    "qwen2": ("qwen2", {"bias": True, "tied": False}),
    # Qwen3: per-head Q/K RMSNorm, a head size of its own (key_length 128
    # with n_embd / n_head = 64), neox RoPE.
    "qwen3": ("qwen3", {"qk_norm": True, "head_dim": 128, "tied": False}),
    # Mistral: the llama architecture with a sliding window (llama.cpp
    # ignores the key for llama files; make_arch_golden.py checks braid
    # against a reference of its own past the window, below).
    "mistral": ("llama", {"window": 64, "tied": False}),
    # Gemma 2: embeddings scaled by sqrt(n_embd), GeGLU, post-attention and
    # post-FFN norms, attention and final logit soft-capping, every other
    # layer sliding, tied embeddings (small ones: the final cap stays out of
    # saturation).
    "gemma2": ("gemma2", {"gemma": 2, "window": 64, "tied": True,
                          "embd_std": 0.1, "softcap": (50.0, 30.0),
                          "head_dim": 128, "post_norm": 30.0}),
    # Gemma 3: per-head Q/K norms, five sliding layers in six (layer 5
    # global), the global layers' RoPE with its own base and linear
    # scaling, the sliding ones' at base 10000.
    "gemma3": ("gemma3", {"gemma": 3, "window": 64, "layers": 6,
                          "qk_norm": True, "head_dim": 128, "tied": False,
                          "embd_std": 0.1, "rope_base": 1e6,
                          "rope_linear": 8.0}),
}


def default_model():
    return os.path.join(os.environ.get("BRAID_CACHE", os.path.expanduser(
        "~/.cache/braid")), "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def model_path(out_dir, name):
    return os.path.join(out_dir, "%s.gguf" % name)


def copy_tokenizer(src, w, skip=()):
    """The tokenizer.* keys of the GGUF reader src (but `skip`) into the
    writer w; returns the number of tokens."""
    n_vocab = 0
    for key, field in src.fields.items():
        if not key.startswith("tokenizer.") or key in skip:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", "surrogateescape")
                        for i in field.data]
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(vals)
            w.add_key_value(key, vals, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(key, bytes(field.parts[-1]).decode("utf-8"), vtype)
        else:
            w.add_key_value(key, field.parts[-1].tolist()[0], vtype)
    return n_vocab


def write(path, name, tokenizer_src):
    arch, opt = ARCHS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    head_dim = opt.get("head_dim", N_EMBD // N_HEAD)
    q_dim, kv_dim = N_HEAD * head_dim, N_HEAD_KV * head_dim
    n_layer = opt.get("layers", N_LAYER)
    w = gguf.GGUFWriter(path + ".tmp", arch)
    n_vocab = copy_tokenizer(tokenizer_src, w)
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(opt.get("rope_base", 10000.0))
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_count(head_dim)
    if "head_dim" in opt:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if "window" in opt:
        w.add_sliding_window(opt["window"])
    if "softcap" in opt:
        w.add_attn_logit_softcapping(opt["softcap"][0])
        w.add_final_logit_softcapping(opt["softcap"][1])
    if "rope_linear" in opt:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(opt["rope_linear"])

    def mat(rows, cols, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(cols)
        return (rng.standard_normal((rows, cols)) * s).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight",
                 mat(n_vocab, N_EMBD, opt.get("embd_std", 1.0)))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    if not opt.get("tied"):
        w.add_tensor("output.weight", mat(n_vocab, N_EMBD))
    if opt.get("rope_freqs"):
        # Llama 3.1's shape: 1 for the fast dims, rising to 8 for the slow.
        ramp = np.clip((np.arange(head_dim // 2) - 8) / 16.0, 0, 1)
        w.add_tensor("rope_freqs.weight", (1 + 7 * ramp).astype(np.float32))
    for il in range(n_layer):
        p = "blk.%d." % il
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(q_dim, N_EMBD))
        w.add_tensor(p + "attn_k.weight", mat(kv_dim, N_EMBD))
        w.add_tensor(p + "attn_v.weight", mat(kv_dim, N_EMBD))
        if opt.get("bias"):
            for t, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                w.add_tensor(p + "attn_%s.bias" % t,
                             (0.5 * rng.standard_normal(n)).astype(np.float32))
        if opt.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", norm(head_dim))
            w.add_tensor(p + "attn_k_norm.weight", norm(head_dim))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, q_dim))
        if opt.get("gemma"):
            # (Scaled up: the blocks' outputs outweigh the embedding, or a
            # tied model only repeats its input token.)
            post = opt.get("post_norm", 1.0)
            w.add_tensor(p + "post_attention_norm.weight", post * norm(N_EMBD))
            w.add_tensor(p + "post_ffw_norm.weight", post * norm(N_EMBD))
        w.add_tensor(p + "ffn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def make(out_dir, model):
    os.makedirs(out_dir, exist_ok=True)
    src = None
    for name in ARCHS:
        path = model_path(out_dir, name)
        if os.path.exists(path):
            continue
        if src is None:
            src = gguf.GGUFReader(model)
        write(path, name, src)
    return out_dir


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(default_model()), "arch")
    model = sys.argv[2] if len(sys.argv) > 2 else default_model()
    print(make(out_dir, model))


if __name__ == "__main__":
    main()
