#!/usr/bin/env python3
"""Dumps a GGUF file's tokenizer vocabulary into the plain-text test format.

Used to create smollm2_vocab.txt so the tokenizer tests do not need the GGUF reader:
  python3 model/tokenizer/testdata/dump_vocab.py MODEL.gguf > model/tokenizer/testdata/smollm2_vocab.txt

Format (read by model/tokenizer/testing/vocab_file.cc), one record per line:
  key<TAB>value            for model, pre, bos, eos, unk, pad, add_bos, add_eos
  tokens<TAB>N             then N lines "type<TAB>text"
  merges<TAB>M             then M lines "left right"
Token texts must not contain whitespace (true of byte-level BPE vocabularies).
"""
import sys

from gguf import GGUFReader


def main():
    r = GGUFReader(sys.argv[1])
    f = r.fields

    def s(key):
        return bytes(f[key].parts[f[key].data[0]]).decode("utf-8")

    def i(key):
        return int(f[key].parts[f[key].data[0]][0])

    out = sys.stdout
    out.write("model\t%s\n" % s("tokenizer.ggml.model"))
    out.write("pre\t%s\n" % s("tokenizer.ggml.pre"))
    for name, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"),
                      ("unk", "unknown_token_id"), ("pad", "padding_token_id"),
                      ("eot", "eot_token_id")):
        if "tokenizer.ggml." + key in f:
            out.write("%s\t%d\n" % (name, i("tokenizer.ggml." + key)))
    for name in ("add_bos", "add_eos"):
        key = "tokenizer.ggml.%s_token" % name
        if key in f:
            out.write("%s\t%d\n" % (name, i(key)))
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[j]).decode("utf-8")
            for j in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[j][0])
             for j in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[j]).decode("utf-8")
              for j in f["tokenizer.ggml.merges"].data]
    out.write("tokens\t%d\n" % len(toks))
    for t, ty in zip(toks, types):
        assert t and not any(c.isspace() for c in t), repr(t)
        out.write("%d\t%s\n" % (ty, t))
    out.write("merges\t%d\n" % len(merges))
    for m in merges:
        assert m.count(" ") == 1 and "\n" not in m, repr(m)
        out.write(m + "\n")


if __name__ == "__main__":
    main()
