#!/usr/bin/env python3
"""Regenerates braid's generation golden fixtures with llama.cpp.

Uses llama-cpp-python (pip install llama-cpp-python) on the same GGUF that braid
serves. For each prompt: llama.cpp's tokenization, its greedy continuation of
NUM_TOKENS tokens, and the logits it computed at each generated position (the
distribution that chose that token), stored as float16.

Outputs (in tests/golden/testdata/):
  generate_golden.tsv   hex(prompt utf-8) TAB prompt ids TAB greedy ids
  generate_logits.f16   float16 [num_prompts, NUM_TOKENS, n_vocab], row-major

Usage: tools/golden/make_generate_golden.py [MODEL.gguf [OUT_DIR]]
"""
import os
import sys

import numpy as np
from llama_cpp import Llama

NUM_TOKENS = 32
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Here is a list of three fruits:\n1.",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Water boils at 100 degrees Celsius, which is",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the tallest mountain in the world?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a haiku about autumn leaves.<|im_end|>\n<|im_start|>assistant\n",
    "Les mathématiques sont",
    "In 1969, Neil Armstrong",
    "import numpy as np\n\nx = np.arange(10)\n",
    "Q: What is 12 plus 30?\nA:",
]


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        here, "..", "..", "tests", "golden", "testdata")
    llm = Llama(model_path=model, n_ctx=1024, n_batch=512, logits_all=True,
                n_threads=2, verbose=False)
    n_vocab = llm.n_vocab()
    rows, logits = [], np.zeros((len(PROMPTS), NUM_TOKENS, n_vocab), np.float16)
    for p, text in enumerate(PROMPTS):
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        out = []
        for i in range(NUM_TOKENS):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            tok = int(np.argmax(row))
            logits[p, i] = row.astype(np.float16)
            out.append(tok)
            llm.eval([tok])
        rows.append("%s\t%s\t%s" % (text.encode().hex(), " ".join(map(str, ids)),
                                    " ".join(map(str, out))))
        print(repr(text[:40]), "->", repr(llm.detokenize(out).decode(errors="replace")))
    with open(os.path.join(out_dir, "generate_golden.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    logits.tofile(os.path.join(out_dir, "generate_logits.f16"))


if __name__ == "__main__":
    main()
