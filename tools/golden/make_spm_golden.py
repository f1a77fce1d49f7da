#!/usr/bin/env python3
"""Writes a SentencePiece vocabulary and llama.cpp's tokenization with it.

No real SentencePiece model (Llama 2, Mistral, Gemma) can be downloaded here,
so one is trained on the fly with the `sentencepiece` package: BPE, byte
fallback, VOCAB_SIZE pieces, on the tokenizer golden corpus itself (the
strings of model/tokenizer/testdata/tokenize_golden.tsv) repeated. It is
written as a GGUF holding only the vocabulary (tokenizer.ggml.model =
"llama": tokens with the U+2581 space marker, scores, token types, <unk> /
<s> / </s>) and a few llama.* keys, which llama.cpp loads vocab-only. Then
every corpus string is tokenized by llama.cpp (add_bos False, special True).

Outputs (committed):
  model/tokenizer/testdata/spm_vocab.gguf
  model/tokenizer/testdata/tokenize_spm_golden.tsv   hex(text) TAB ids
//model/tokenizer:tokenize_golden_test requires braid to reproduce every line.

Usage (llama-cpp-python's interpreter, with sentencepiece and gguf):
  tools/golden/make_spm_golden.py
"""
import os
import sys
import tempfile

import gguf
import sentencepiece as spm
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "..", "model", "tokenizer", "testdata")
VOCAB_SIZE = 1200


def corpus():
    with open(os.path.join(TESTDATA, "tokenize_golden.tsv")) as f:
        return [bytes.fromhex(line.split("\t")[0]).decode("utf-8", "replace")
                for line in f if line.strip()]


def train(texts, prefix):
    with open(prefix + ".txt", "w") as f:
        for _ in range(3):
            for t in texts:
                f.write(t.replace("\n", " ") + "\n")
    spm.SentencePieceTrainer.train(
        input=prefix + ".txt", model_prefix=prefix, vocab_size=VOCAB_SIZE,
        model_type="bpe", byte_fallback=True, character_coverage=0.98,
        num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        split_digits=True, allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity",
        minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def write_vocab(sp, path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(64)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def main():
    texts = corpus()
    vocab = os.path.join(TESTDATA, "spm_vocab.gguf")
    with tempfile.TemporaryDirectory() as tmp:
        sp = train(texts, os.path.join(tmp, "spm"))
        write_vocab(sp, vocab)
    llm = Llama(model_path=vocab, vocab_only=True, verbose=False)
    lines = []
    for t in texts:
        ids = llm.tokenize(t.encode(), add_bos=False, special=True)
        lines.append("%s\t%s" % (t.encode().hex(), " ".join(map(str, ids))))
    with open(os.path.join(TESTDATA, "tokenize_spm_golden.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(len(lines), "strings;", os.path.getsize(vocab), "bytes of vocabulary")


if __name__ == "__main__":
    main()
