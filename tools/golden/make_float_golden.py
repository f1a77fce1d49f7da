#!/usr/bin/env python3
"""Writes tests/golden/testdata/float_golden.tsv with llama.cpp.

The default model converted to F16 and to BF16 (tools/gguf_convert.py; the
test converts it the same way in memory), the first PROMPTS golden prompts
(make_generate_golden.py's), each greedy for NUM_TOKENS tokens with
llama-cpp-python. One line per model type and prompt:

  TYPE  hex(prompt)  prompt ids  greedy ids  top logits

where top logits holds, per generated position, the TOP highest logits as
id:value pairs joined by ',', positions joined by ';'; and a line

  #CHECKSUM  TYPE  s1  s2

per type: gguf_convert.checksum of the converted file (the test converts in
memory and must get the same weights).
//tests/golden:float_golden_test checks braid's float paths against them.

Usage: tools/golden/make_float_golden.py [MODEL.gguf [OUT.tsv]]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_generate_golden import PROMPTS  # noqa: E402

sys.path.insert(0, os.path.dirname(HERE))
import gguf_convert  # noqa: E402

NUM_PROMPTS = 4
NUM_TOKENS = 16
TOP = 8


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "..", "tests", "golden", "testdata", "float_golden.tsv")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("f16", "bf16"):
            path = os.path.join(tmp, kind + ".gguf")
            subprocess.run([sys.executable,
                            os.path.join(HERE, "..", "gguf_convert.py"),
                            model, path, kind], check=True)
            s1, s2 = gguf_convert.checksum(path, gguf_convert.OUT_TYPES[kind])
            lines.append("#CHECKSUM\t%s\t%d\t%d" % (kind.upper(), s1, s2))
            llm = Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True,
                        n_threads=2, verbose=False)
            for text in PROMPTS[:NUM_PROMPTS]:
                ids = llm.tokenize(text.encode(), add_bos=False, special=True)
                llm.reset()
                llm.eval(ids)
                greedy, tops = [], []
                for _ in range(NUM_TOKENS):
                    row = np.array(llm.scores[llm.n_tokens - 1],
                                   dtype=np.float32)
                    best = np.argsort(-row, kind="stable")[:TOP]
                    tops.append(",".join("%d:%.9g" % (i, row[i])
                                         for i in best))
                    greedy.append(int(best[0]))
                    llm.eval([greedy[-1]])
                lines.append("\t".join([
                    kind.upper(), text.encode().hex(),
                    " ".join(map(str, ids)), " ".join(map(str, greedy)),
                    ";".join(tops)]))
                print(kind, repr(text[:30]), "->",
                      repr(llm.detokenize(greedy).decode(errors="replace")))
            del llm
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
