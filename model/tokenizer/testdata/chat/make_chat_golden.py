#!/usr/bin/env python3
"""Renders the reference chat templates in this folder with jinja2, the way
Hugging Face's apply_chat_template does (trim_blocks, lstrip_blocks,
raise_exception), into chat_golden.tsv for //model/tokenizer:chat_template_test.

Run from this folder:  python3 make_chat_golden.py > chat_golden.tsv
Line format (all fields hex of UTF-8 unless noted):
  file TAB family TAB bos TAB eos TAB add_generation_prompt(0/1) TAB
  messages (role:content pairs joined by ',', hex each) TAB output or ERROR
"""
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATES = [  # file, family, bos, eos
    ("smollm2.jinja", "chatml", "<|im_start|>", "<|im_end|>"),
    ("chatml.jinja", "chatml", "<s>", "<|im_end|>"),
    ("llama2.jinja", "llama2", "<s>", "</s>"),
    ("llama3.jinja", "llama3", "<|begin_of_text|>", "<|eot_id|>"),
    ("mistral_v1.jinja", "mistral-v1", "<s>", "</s>"),
    ("mistral_v3.jinja", "mistral-v3", "<s>", "</s>"),
    ("mistral_v7.jinja", "mistral-v7", "<s>", "</s>"),
    ("gemma.jinja", "gemma", "<bos>", "<eos>"),
    ("gemma3.jinja", "gemma3", "<bos>", "<eos>"),
    ("zephyr.jinja", "zephyr", "<s>", "</s>"),
    ("phi3.jinja", "phi3", "<s>", "<|endoftext|>"),
    ("deepseek.jinja", "deepseek", "<｜begin▁of▁sentence｜>", "<|EOT|>"),
]

S = ("system", "You are terse.")
U = ("user", "Hello!")
A = ("assistant", "Hi, how can I help?")
U2 = ("user", "  What is 2+2?\n")
A2 = ("assistant", "\t4 \n")
UNI = ("user", "日本語で答えて 😀 — café")
CONVERSATIONS = [
    [U], [S, U], [U, A, U2], [S, U, A, U2], [S, U, A, U2, A2], [UNI],
    [S, UNI, A], [], [U, U], [A, U], [S], [S, S, U], [U, A, S, U2],
    [("user", "")], [("system", "  padded system  "), ("user", "x")],
    [S, U, A], [S, U, A, U], [S, U, A, U, A],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    hx = lambda s: s.encode("utf-8").hex()
    for path, family, bos, eos in TEMPLATES:
        template = env.from_string(open(path, encoding="utf-8").read())
        for conv in CONVERSATIONS:
            for gen in (False, True):
                msgs = [{"role": r, "content": c} for r, c in conv]
                try:
                    out = hx(template.render(messages=msgs, bos_token=bos,
                                             eos_token=eos,
                                             add_generation_prompt=gen))
                except jinja2.exceptions.TemplateError:
                    out = "ERROR"
                enc = ",".join("%s:%s" % (hx(r), hx(c)) for r, c in conv)
                print("\t".join([path, family, hx(bos), hx(eos),
                                 "1" if gen else "0", enc, out]))


if __name__ == "__main__":
    main()
