#!/usr/bin/env python3
"""Writes tests/golden/testdata/arch_golden.tsv with llama.cpp.

For each random-weight model arch_models.py writes (one per architecture
braid reads besides SmolLM2's own): a PROMPT_TOKENS-token prompt of random
token ids, then NUM_TOKENS greedy tokens with llama-cpp-python, and at every
generated position llama.cpp's TOP highest logits. The prompt is longer than
a 256-token window would be: RoPE, the frequency factors and attention are
checked well past the first positions. Lines as make_kquant_golden.py's:

  #FILE  NAME  s1  s2         (kquant_models.fingerprint of the file)
  NAME  hex("")  prompt ids  greedy ids  top logits

//tests/golden:arch_golden_test checks braid against them.

llama.cpp reads no sliding window for the llama architecture (Mistral's
files), so for those models (arch_models.ARCHS with a "window" and arch
llama) the fixture comes from the float64 reference below instead, with the
window; the script first holds that reference, without the window, to
llama.cpp's logits on the same file (centred top-32 cosine >= 0.9999 at every
position), so it is checked against llama.cpp everywhere but in the window.

Usage (llama-cpp-python's interpreter):
  tools/golden/make_arch_golden.py [MODELS_DIR [OUT.tsv]]
"""
import os
import sys

import numpy as np
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arch_models  # noqa: E402
import kquant_models  # noqa: E402
from make_kquant_golden import centred_cosine, greedy_with_tops  # noqa: E402

PROMPT_TOKENS = 256
NUM_TOKENS = 32
TOP = 32


class LlamaReference:
    """The llama architecture's forward pass in float64 numpy (RMSNorm,
    ggml's normal RoPE, GQA causal attention with an optional sliding
    window, SwiGLU), on an F32 GGUF."""

    def __init__(self, path):
        import gguf
        r = gguf.GGUFReader(path)
        def val(key):
            f = r.fields[key]
            return f.parts[f.data[0]].tolist()[0]
        self.n_layer = val("llama.block_count")
        self.n_head = val("llama.attention.head_count")
        self.n_kv = val("llama.attention.head_count_kv")
        self.eps = val("llama.attention.layer_norm_rms_epsilon")
        self.base = val("llama.rope.freq_base")
        self.t = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}
        self.n_embd = self.t["token_embd.weight"].shape[1]
        self.hd = self.n_embd // self.n_head

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x [n, heads, hd]
        i = np.arange(self.hd // 2)
        theta = pos[:, None] * self.base ** (-2.0 * i / self.hd)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def last_logits(self, ids, window):
        t, n = self.t, len(ids)
        pos = np.arange(n, dtype=np.float64)
        x = t["token_embd.weight"][ids]
        j, i = np.meshgrid(np.arange(n), np.arange(n))
        mask = (j <= i) & ((i - j < window) if window else True)
        g = self.n_head // self.n_kv
        for il in range(self.n_layer):
            p = "blk.%d." % il
            h = self.norm(x, t[p + "attn_norm.weight"])
            q = self.rope((h @ t[p + "attn_q.weight"].T).reshape(
                n, self.n_head, self.hd), pos)
            k = self.rope((h @ t[p + "attn_k.weight"].T).reshape(
                n, self.n_kv, self.hd), pos)
            v = (h @ t[p + "attn_v.weight"].T).reshape(n, self.n_kv, self.hd)
            att = np.empty((n, self.n_head, self.hd))
            for hh in range(self.n_head):
                sc = q[:, hh] @ k[:, hh // g].T / np.sqrt(self.hd)
                sc = np.where(mask, sc, -np.inf)
                sc = np.exp(sc - sc.max(-1, keepdims=True))
                att[:, hh] = (sc / sc.sum(-1, keepdims=True)) @ v[:, hh // g]
            x = x + att.reshape(n, -1) @ t[p + "attn_output.weight"].T
            h = self.norm(x, t[p + "ffn_norm.weight"])
            gate = h @ t[p + "ffn_gate.weight"].T
            up = h @ t[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ t[
                p + "ffn_down.weight"].T
        h = self.norm(x[-1], t["output_norm.weight"])
        return (t["output.weight"] @ h).astype(np.float32)


def reference_greedy(ref, ids, window, llm=None):
    """greedy_with_tops's results from the reference; with llm, llama.cpp
    teacher-forced on the same tokens alongside (the worst cosine)."""
    greedy, tops, worst = [], [], 1.0
    seq = list(ids)
    if llm is not None:
        llm.reset()
        llm.eval(seq)
    for _ in range(NUM_TOKENS):
        row = ref.last_logits(seq, window)
        best = np.argsort(-row, kind="stable")[:TOP]
        tops.append(",".join("%d:%.9g" % (i, row[i]) for i in best))
        if llm is not None:
            theirs = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            worst = min(worst, centred_cosine(theirs[best], row[best]))
        greedy.append(int(best[0]))
        seq.append(greedy[-1])
        if llm is not None:
            llm.eval([greedy[-1]])
    return greedy, tops, worst


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(arch_models.default_model()), "arch")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "..", "tests", "golden", "testdata", "arch_golden.tsv")
    arch_models.make(models, arch_models.default_model())
    lines = []
    for name in arch_models.ARCHS:
        path = arch_models.model_path(models, name)
        s1, s2 = kquant_models.fingerprint(path)
        lines.append("#FILE\t%s\t%d\t%d" % (name, s1, s2))
        llm = Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True,
                    n_threads=2, verbose=False)
        rng = np.random.default_rng(7)
        ids = [int(t) for t in rng.integers(0, llm.n_vocab(), PROMPT_TOKENS)]
        arch, opt = arch_models.ARCHS[name]
        if arch == "llama" and "window" in opt:
            ref = LlamaReference(path)
            _, _, worst = reference_greedy(ref, ids, None, llm)
            print(name, "reference without the window vs llama.cpp: worst "
                  "cosine %.7f" % worst)
            assert worst >= 0.9999, worst
            greedy, tops, _ = reference_greedy(ref, ids, opt["window"])
        else:
            greedy, tops, _ = greedy_with_tops(llm, ids, NUM_TOKENS, TOP)
        lines.append("\t".join([name, "", " ".join(map(str, ids)),
                                " ".join(map(str, greedy)), ";".join(tops)]))
        print(name, "greedy", greedy[:8])
        del llm
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
