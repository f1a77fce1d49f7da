#!/usr/bin/env python3
"""Writes smollm2_reference.txt: llama.cpp's logits summary for a fixed prompt.

Run by hand (needs `pip install llama-cpp-python`):
  python3 model/cpu/testdata/make_reference.py [model.gguf] [--dump-full out.npy]
Each line: position, then the top-5 token ids and their logits from llama.cpp.
With --compare ours.f32 (raw [n, n_vocab] float32 logits written by
`BRAID_DUMP_LOGITS=... llama_test`), prints per-position cosine similarity instead.
"""
import sys

import numpy as np
from llama_cpp import Llama

MODEL = "/root/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "The capital of France is Paris. The capital of Germany is"


def main():
    args = sys.argv[1:]
    compare = None
    if "--compare" in args:
        i = args.index("--compare")
        compare = args[i + 1]
        del args[i:i + 2]
    model = args[0] if args else MODEL
    llm = Llama(model_path=model, n_ctx=256, logits_all=True, n_threads=2,
                verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=False)
    llm.eval(tokens)
    logits = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    if compare:
        ours = np.fromfile(compare, dtype=np.float32).reshape(len(tokens), -1)
        for p in range(len(tokens)):
            a, b = ours[p], logits[p]
            cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            print(p, "cos=%.6f" % cos, "top1 ours/ref", int(a.argmax()),
                  int(b.argmax()))
        return
    print("# prompt:", PROMPT)
    print("# tokens:", " ".join(str(t) for t in tokens))
    for p in range(len(tokens)):
        top = np.argsort(-logits[p])[:5]
        print(p, " ".join("%d:%.4f" % (t, logits[p][t]) for t in top))


if __name__ == "__main__":
    main()
