#!/usr/bin/env python3
"""Renders the reference chat templates in this folder with jinja2, the way
Hugging Face's apply_chat_template does (trim_blocks, lstrip_blocks,
raise_exception), into chat_golden.tsv for //model/tokenizer:chat_template_test.

Run from this folder:  python3 make_chat_golden.py > chat_golden.tsv
                       python3 make_chat_golden.py --tools > chat_tools_golden.tsv
Line format (all fields hex of UTF-8 unless noted):
  file TAB family TAB bos TAB eos TAB add_generation_prompt(0/1) TAB
  messages (role:content pairs joined by ',', hex each) TAB output or ERROR
With --tools (templates that call functions), before the output:
  TAB tools (each tool as `tojson` writes it, hex, joined by ','; '-' none)
and each message is role:content:calls, calls being name;arguments pairs
(arguments as `tojson` writes them) joined by '+'.
"""
import json
import sys

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
    ("qwen2_5.jinja", "qwen2.5", "<|im_start|>", "<|im_end|>"),
]
TOOL_TEMPLATES = [("qwen2_5.jinja", "qwen2.5", "<|im_start|>", "<|im_end|>")]

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


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {
        "type": "string", "description": "A city, e.g. \"Paris\""},
        "days": {"type": "integer", "minimum": 1}},
        "required": ["city"]}}}
CLOCK = {"type": "function", "function": {
    "name": "now", "description": "The time — UTC, as \\d{2}:\\d{2}\n",
    "parameters": {"type": "object", "properties": {}}}}
TOOLS = [None, [WEATHER], [WEATHER, CLOCK]]


def call(name, arguments):
    return {"type": "function", "function": {"name": name,
                                             "arguments": arguments}}


PARIS = call("get_weather", {"city": "Paris", "days": 2})
TIME = call("now", {})
ASK = ("assistant", None, [PARIS])
ASK2 = ("assistant", "Let me look.", [PARIS, TIME])
RESULT = ("tool", '{"temp": 21, "sky": "clear"}', [])
RESULT2 = ("tool", "12:00", [])
TOOL_CONVERSATIONS = [
    [U], [S, U], [U, ASK, RESULT], [S, U, ASK, RESULT, A],
    [U, ASK2, RESULT, RESULT2], [U, ASK2, RESULT, RESULT2, A, U2],
    [RESULT, U], [S, U, A, ASK, RESULT], [UNI, ASK],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None,
           sort_keys=False):
    """Hugging Face's tojson filter (apply_chat_template's environment)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def tool_lines(env, hx):
    for path, family, bos, eos in TOOL_TEMPLATES:
        template = env.from_string(open(path, encoding="utf-8").read())
        for tools in TOOLS:
            for conv in TOOL_CONVERSATIONS:
                for gen in (False, True):
                    msgs = []
                    for m in conv:
                        role, content = m[0], m[1]
                        calls = m[2] if len(m) > 2 else []
                        msg = {"role": role, "content": content}
                        if calls:
                            msg["tool_calls"] = calls
                        msgs.append(msg)
                    try:
                        out = hx(template.render(
                            messages=msgs, tools=tools, bos_token=bos,
                            eos_token=eos, add_generation_prompt=gen))
                    except jinja2.exceptions.TemplateError:
                        out = "ERROR"
                    enc = ",".join(
                        "%s:%s:%s" % (hx(m[0]), hx(m[1] or ""), "+".join(
                            "%s;%s" % (hx(c["function"]["name"]),
                                       hx(tojson(c["function"]["arguments"])))
                            for c in (m[2] if len(m) > 2 else [])))
                        for m in conv)
                    tl = ",".join(hx(tojson(t)) for t in tools) if tools \
                        else "-"
                    print("\t".join([path, family, hx(bos), hx(eos),
                                     "1" if gen else "0", enc, tl, out]))


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    hx = lambda s: s.encode("utf-8").hex()
    if "--tools" in sys.argv[1:]:
        tool_lines(env, hx)
        return
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
