#!/usr/bin/env python3
"""Writes tests/golden/testdata/kquant_golden.tsv with llama.cpp.

For each file kquant_models.py writes (the default model in Q4_K_M, Q5_K_M,
Q6_K, Q3_K_M, Q2_K, Q5_0, Q5_1 and Q8_0, and a random Llama 3 model whose
matrices are all true K-quants in Q2_K, Q3_K_M, Q4_K_M, Q5_K_M and Q6_K, by
llama.cpp's own quantizer): the
first NUM_PROMPTS golden prompts (make_generate_golden.py's), each greedy
for NUM_TOKENS tokens with llama-cpp-python, and at every generated position
llama.cpp's TOP highest logits. Lines:

  #FILE  NAME  s1  s2                  (kquant_models.fingerprint of the file)
  #SELF  NAME  same  total  first8  worst  median
  NAME  hex(prompt)  prompt ids  greedy ids  top logits

top logits: per position TOP id:value pairs joined by ',', positions by ';'.

#SELF is llama.cpp against itself: the same prompts run again with the
prompt fed one token at a time (n_batch 1) instead of in one batch, teacher-
forced on the fixture's greedy tokens: at how many positions its argmax is
the fixture's token (same of total), how many of those that differ are
among each prompt's first 8, and the worst and median centred cosine over
the fixture's top logits (kquant_golden_test's measure). llama.cpp's
batched and one-token kernels sum in different orders; on this model that
alone moves logits by up to ~1 and flips near-ties, and braid is held to
the same closeness. //tests/golden:kquant_golden_test checks braid against
both.

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


def greedy_with_tops(llm, ids, num_tokens=NUM_TOKENS, top=TOP):
    """llama.cpp's greedy continuation of ids: (tokens, per position the
    fixture's 'id:value,...' text, per position [(id, value)])."""
    llm.reset()
    llm.eval(ids)
    greedy, tops, pairs = [], [], []
    for _ in range(num_tokens):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        best = np.argsort(-row, kind="stable")[:top]
        tops.append(",".join("%d:%.9g" % (i, row[i]) for i in best))
        pairs.append([(int(i), float("%.9g" % row[i])) for i in best])
        greedy.append(int(best[0]))
        llm.eval([greedy[-1]])
    return greedy, tops, pairs


def centred_cosine(a, b):
    a = np.asarray(a, np.float64) - np.mean(a)
    b = np.asarray(b, np.float64) - np.mean(b)
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


def self_consistency(path, cases):
    """llama.cpp with the prompt fed token by token against the fixture."""
    llm = Llama(model_path=path, n_ctx=512, n_batch=1, n_ubatch=1,
                logits_all=True, n_threads=2, verbose=False)
    same = total = first8 = 0
    cosines = []
    for ids, greedy, tops in cases:
        llm.reset()
        llm.eval(ids)
        for i, tok in enumerate(greedy):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            best = int(np.argmax(row))
            same += best == tok
            total += 1
            first8 += i < 8 and best != tok
            cosines.append(centred_cosine([row[t] for t, _ in tops[i]],
                                          [v for _, v in tops[i]]))
            llm.eval([tok])
    del llm
    return same, total, first8, min(cosines), float(np.median(cosines))


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(kquant_models.default_model()), "kquant")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "..", "tests", "golden", "testdata", "kquant_golden.tsv")
    kquant_models.make(models, kquant_models.default_model())
    lines = []
    for name in list(kquant_models.TYPES) + list(kquant_models.RAND_TYPES):
        path = kquant_models.model_path(models, name)
        s1, s2 = kquant_models.fingerprint(path)
        lines.append("#FILE\t%s\t%d\t%d" % (name, s1, s2))
        llm = Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True,
                    n_threads=2, verbose=False)
        cases = []
        for text in PROMPTS[:NUM_PROMPTS]:
            ids = llm.tokenize(text.encode(), add_bos=False, special=True)
            greedy, tops, top_pairs = greedy_with_tops(llm, ids)
            cases.append((ids, greedy, top_pairs))
            lines.append("\t".join([
                name, text.encode().hex(), " ".join(map(str, ids)),
                " ".join(map(str, greedy)), ";".join(tops)]))
            print(name, repr(text[:30]), "->",
                  repr(llm.detokenize(greedy).decode(errors="replace")))
        del llm
        same, total, first8, worst, median = self_consistency(path, cases)
        lines.insert(len(lines) - NUM_PROMPTS, "#SELF\t%s\t%d\t%d\t%d\t%.6f\t%.6f" % (
            name, same, total, first8, worst, median))
        print(name, "llama.cpp one token at a time: %d of %d greedy, %d in "
              "the first 8, worst cosine %.6f, median %.6f" % (
                  same, total, first8, worst, median))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
