#!/usr/bin/env python3
"""Writes tests/golden/testdata/kquant_golden.tsv with llama.cpp.

For each file kquant_models.py writes (the default model in Q4_K_M, Q5_K_M,
Q6_K, Q3_K_M, Q2_K, Q5_0, Q5_1 and Q8_0, by llama.cpp's own quantizer): the
first NUM_PROMPTS golden prompts (make_generate_golden.py's), each greedy
for NUM_TOKENS tokens with llama-cpp-python, and at every generated position
llama.cpp's TOP highest logits. Lines:

  #FILE  NAME  s1  s2                  (kquant_models.fingerprint of the file)
  NAME  hex(prompt)  prompt ids  greedy ids  top logits

top logits: per position TOP id:value pairs joined by ',', positions by ';'.
//tests/golden:kquant_golden_test checks braid against them.

Usage (llama-cpp-python's interpreter):
  tools/golden/make_kquant_golden.py [MODELS_DIR [OUT.tsv]]
"""
import os
import sys

import numpy as np
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kquant_models  # noqa: E402
from make_generate_golden import PROMPTS  # noqa: E402

NUM_PROMPTS = 10
NUM_TOKENS = 32
TOP = 32


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(kquant_models.default_model()), "kquant")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "..", "tests", "golden", "testdata", "kquant_golden.tsv")
    kquant_models.make(models, kquant_models.default_model())
    lines = []
    for name in kquant_models.TYPES:
        path = kquant_models.model_path(models, name)
        s1, s2 = kquant_models.fingerprint(path)
        lines.append("#FILE\t%s\t%d\t%d" % (name, s1, s2))
        llm = Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True,
                    n_threads=2, verbose=False)
        for text in PROMPTS[:NUM_PROMPTS]:
            ids = llm.tokenize(text.encode(), add_bos=False, special=True)
            llm.reset()
            llm.eval(ids)
            greedy, tops = [], []
            for _ in range(NUM_TOKENS):
                row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
                best = np.argsort(-row, kind="stable")[:TOP]
                tops.append(",".join("%d:%.9g" % (i, row[i]) for i in best))
                greedy.append(int(best[0]))
                llm.eval([greedy[-1]])
            lines.append("\t".join([
                name, text.encode().hex(), " ".join(map(str, ids)),
                " ".join(map(str, greedy)), ";".join(tops)]))
            print(name, repr(text[:30]), "->",
                  repr(llm.detokenize(greedy).decode(errors="replace")))
        del llm
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
