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
from make_kquant_golden import greedy_with_tops  # noqa: E402

PROMPT_TOKENS = 256
NUM_TOKENS = 32
TOP = 32


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
        greedy, tops, _ = greedy_with_tops(llm, ids, NUM_TOKENS, TOP)
        lines.append("\t".join([name, "", " ".join(map(str, ids)),
                                " ".join(map(str, greedy)), ";".join(tops)]))
        print(name, "greedy", greedy[:8])
        del llm
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
