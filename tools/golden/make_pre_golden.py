#!/usr/bin/env python3
"""Writes llama.cpp's tokenization of the golden corpus under other BPE
pre-tokenizers.

Llama 3 ("llama-bpe") and Qwen2 ("qwen2") files are byte-level BPE like the
default model but split text with other regexes before merging (and Llama 3
emits a word that is itself a token without merging). No such vocabulary can
be downloaded here, so the default model's vocabulary and merges are written
into a vocabulary-only GGUF with tokenizer.ggml.pre replaced, and llama.cpp
tokenizes every string of model/tokenizer/testdata/tokenize_golden.tsv with
it (add_bos False, special True). The test builds the same vocabulary from
testdata/smollm2_vocab.txt with the same `pre`.

Outputs: model/tokenizer/testdata/tokenize_<pre>_golden.tsv (hex TAB ids).
Usage (llama-cpp-python's interpreter): tools/golden/make_pre_golden.py [MODEL]
"""
import os
import sys
import tempfile

import gguf
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import arch_models  # noqa: E402
from make_spm_golden import TESTDATA, corpus  # noqa: E402

PRES = ["llama-bpe", "qwen2"]


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else arch_models.default_model()
    src = gguf.GGUFReader(model)
    texts = corpus()
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRES:
            path = os.path.join(tmp, pre + ".gguf")
            w = gguf.GGUFWriter(path, "llama")
            w.add_context_length(512)
            w.add_embedding_length(64)
            w.add_block_count(1)
            w.add_feed_forward_length(64)
            w.add_head_count(1)
            w.add_layer_norm_rms_eps(1e-5)
            arch_models.copy_tokenizer(src, w, skip=("tokenizer.ggml.pre",
                                                     "tokenizer.chat_template"))
            w.add_tokenizer_pre(pre)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.close()
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
            lines = []
            for t in texts:
                ids = llm.tokenize(t.encode(), add_bos=False, special=True)
                lines.append("%s\t%s" % (t.encode().hex(), " ".join(map(str, ids))))
            del llm
            out = os.path.join(TESTDATA, "tokenize_%s_golden.tsv" % pre)
            with open(out, "w") as f:
                f.write("\n".join(lines) + "\n")
            print(pre, len(lines), "strings")


if __name__ == "__main__":
    main()
