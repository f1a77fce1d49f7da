#!/usr/bin/env python3
"""Writes model/tokenizer/testdata/tokenize_golden.tsv from llama.cpp.

Each line is one case: the hex of the UTF-8 input, a TAB, and the token ids
llama.cpp produces with add_bos=False, special=True (parse special tokens),
space-separated. //model/tokenizer:tokenize_golden_test requires braid's
tokenizer to reproduce every line exactly.

Usage (from the repository root; needs llama-cpp-python):
  python3 tools/golden/make_tokenize_golden.py \
      --model /root/.cache/braid/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out model/tokenizer/testdata/tokenize_golden.tsv
"""
import argparse
import random

from llama_cpp import Llama

HAND_WRITTEN = [
    # ASCII prose and casing.
    "Hello", "Hello world", "hello world", "HELLO WORLD", "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "a", "A", " ", "  ", "   ", "\n", "\t", "\r\n", "!", "?!", "...",
    " leading space", "trailing space ", "  two leading", "two trailing  ",
    "multiple   spaces   between", "CamelCaseIdentifier", "snake_case_name",
    "kebab-case-name", "ALLCAPS", "MiXeD cAsE", "e.g. i.e. etc.",
    # Contractions.
    "I'm", "you're", "he's", "we've", "they'll", "I'd", "can't", "won't",
    "it's", "It'S", "I'M", "YOU'RE", "they'LL", "'s", "'t", "'re", "'ve",
    "'m", "'ll", "'d", "' s", "''s", "rock'n'roll", "O'Neill's",
    "don't you think it's", "She said 'hello'",
    # Accents and Latin extensions.
    "café", "naïve", "résumé", "Ångström", "façade", "jalapeño", "Zürich",
    "São Paulo", "Dvořák", "Łódź", "straße", "ﬁnance", "Æsir", "œuvre",
    "e\u0301", "cafe\u0301 combining", "Ελληνικά γράμματα", "Русский текст",
    "Українська мова", "עברית", "العربية", "हिन्दी", "ไทย", "한국어 텍스트",
    "Tiếng Việt", "ქართული", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ",
    # CJK.
    "你好", "你好，世界！", "中文文本测试", "日本語のテキスト", "ひらがな",
    "カタカナ", "漢字と仮名", "東京都", "我爱自然语言处理。", "一二三四五",
    "全角スペース\u3000あり", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    # Emoji, including ZWJ sequences, flags, skin tones, keycaps.
    "😀", "😀😃😄", "Hello 👋", "🎉🎉🎉", "👍🏽", "👨‍👩‍👧‍👦", "👩‍💻",
    "🏳️‍🌈", "🇺🇸🇫🇷", "1️⃣", "❤️", "☃", "✓ done", "🤖 robot", "🙂‍↕️",
    "emoji👀inline", "🧑🏿‍🚀 astronaut",
    # Code.
    "def foo(x):\n    return x + 1\n",
    "int main() { return 0; }",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "if x == 1 and y != 2:\n    pass",
    "console.log(`value: ${x}`);",
    "<div class=\"main\">Hello</div>",
    "SELECT * FROM users WHERE id = 42;",
    "#include <stdio.h>\n",
    "std::vector<int> v{1, 2, 3};",
    "x = [i**2 for i in range(10)]",
    "fn main() -> Result<(), Box<dyn Error>> {}",
    "$ ls -la | grep '.py' && echo \"ok\"",
    "{\"key\": \"value\", \"n\": 12.5e-3}",
    "a->b; c::d; e=>f; g!==h; i>>=2; j<<=3;",
    "    indented four\n        indented eight\n",
    "// comment\n/* block */\n# hash\n-- sql",
    "https://example.com/path?query=1&x=y#frag",
    "user@example.com", "C:\\Windows\\System32", "/usr/local/bin/python3",
    "@decorator\ndef f(): ...", "lambda x: x*2", "0xDEADBEEF 0b1010 0o777",
    # Whitespace runs.
    "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a\n\n\nb",
    "a \nb", "a\n b", "a \n b", "a\r\nb", "a \t b", "\t\tindented",
    "  \n  \n", "\n\n\n", "\t \t \t", "line1\nline2\nline3",
    "trailing newline\n", "trailing spaces   ", "  \t\n mixed \t\n  ",
    "a\u00a0b", "a\u2003b", "a\u3000b", "a\u2028b", "a\u0085b", "a\x0bb",
    "a\x0cb", "end with tab\t", "     ", "\n \n \n", " \n", "\n ",
    # Digits and numbers.
    "0", "1", "12", "123", "1234", "12345", "123456789", "3.14159",
    "1,000,000", "1e10", "-42", "+7", "2024-01-15", "12:30:45", "$100.00",
    "99%", "v1.2.3", "A1B2C3", "abc123def", "3rd 21st 100th",
    "12345678901234567890123456789012345678901234567890",
    "٣٤٥ Arabic-Indic digits", "१२३ Devanagari digits", "①②③", "½ ¼ ¾",
    "Ⅻ roman", "x² + y³", "phone: +1 (555) 123-4567",
    # Punctuation.
    "Hello!!!", "What?!?", "Wait...", "—em dash—", "–en dash–", "«quotes»",
    "“smart quotes”", "‘single’", "¿Qué?", "¡Hola!", "(parens)", "[brackets]",
    "{braces}", "<angles>", "a/b\\c|d", "~`!@#$%^&*()_+-=", "§¶†‡•", "©®™",
    "…", "、。「」", "!!!???...,,,;;;:::", "--", "---", "==", "=>",
    "__init__", "**bold**", "_italic_", "# Heading", "- item\n- item",
    "> quote", "| a | b |\n|---|---|",
    # Special tokens embedded in text.
    "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<|im_start|>user\nHello<|im_end|>\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text", "<|im_end|><|im_start|>",
    "<|im_start|><|im_start|>", " <|im_start|> ", "x<|im_end|>y",
    "<|im_start", "im_start|>", "<|im_start|", "<repo_name>braid<file_sep>",
    "<filename>main.cc\n<gh_stars>10", "<jupyter_code>print(1)<jupyter_output>",
    "<issue_start>bug<issue_comment>fix<issue_closed>", "<empty_output>",
    "<|IM_START|>", "< |im_start| >",
    # Mixed scripts.
    "Hello 世界", "Привет world", "Tokyo 東京 とうきょう", "café ☕ 咖啡",
    "αβγ abc 123 ・ 한글", "mixed: English, Русский, 中文, العربية, 😀",
    "naïve_variable = '値'", "東京2024年", "2024年1月15日", "价格：¥100",
    "emoji🎉and中文mixed", "ascii→unicode→ascii",
    # Edge cases of the Unicode categories and whitespace classes.
    "a\u180eb", "a\u200bb", "zero\u200dwidth", "\x00nul", "bell\x07",
    "\x1c\x1d\x1e\x1f", "\ue000 private use", "\U000e0001 tag",
    "\u0378 unassigned", "\U0001f9ff", "\u2060joiner", "ab\ufeffcd",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "ababababababababababababababababababab", "!" * 40, " " * 33 + "x",
    "\n" * 20 + "x", "😀" * 12,
]

PARAGRAPHS = [
    "Large language models are trained on vast amounts of text. They learn to "
    "predict the next token given the previous ones, and in doing so they pick "
    "up grammar, facts, and some reasoning ability. Tokenization is the first "
    "step: text is split into pieces, and each piece is mapped to an integer id.",
    "Il était une fois, dans un petit village au bord de la mer, une vieille "
    "femme qui vendait des coquillages. Chaque matin, elle se levait à l'aube "
    "et marchait le long de la plage — même quand il pleuvait.",
    "机器学习是人工智能的一个分支。它使计算机能够在没有明确编程的情况下从数据中学习。"
    "深度学习则使用多层神经网络来学习数据的表示。",
    "The meeting is scheduled for 2024-03-15 at 14:30 UTC.\n\nAgenda:\n"
    "1. Review Q4 results ($1,234,567.89 revenue, +12.5% YoY)\n"
    "2. Discuss the roadmap\n\t- Feature A\n\t- Feature B\n3. AOB\n",
    "class Tokenizer:\n    \"\"\"Byte-level BPE.\"\"\"\n\n    def __init__(self, "
    "vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:\n"
    "        self.vocab = vocab\n        self.ranks = {m: i for i, m in "
    "enumerate(merges)}\n\n    def encode(self, text: str) -> list[int]:\n"
    "        return [self.vocab[t] for t in self._bpe(text)]\n",
    "Ich habe gestern im Café „Zum Löwen“ einen Apfelstrudel gegessen. Die "
    "Bedienung war äußerst freundlich, aber die Rechnung — 23,50 € — war "
    "überraschend hoch!",
    "Москва — столица России, крупнейший по численности населения город "
    "страны. В 2021 году население составляло 12 655 050 человек.",
    "日本の首都は東京です。東京には多くの観光地があります。例えば、浅草寺や"
    "東京タワー、渋谷のスクランブル交差点などが有名です。",
]


def generated_cases(rng):
    """Random mixtures of the pieces that stress the pre-tokenizer."""
    atoms = ["a", "Z", "é", "中", "😀", "👨‍👩‍👧", "1", "42", "3.5", " ", "  ",
             "\t", "\n", "\r\n", "'s", "'ll", "!", "...", "-", "_", "<|im_end|>",
             "<|im_start|>", "word", " word", "Ünïcödé", "\u00a0", "٣", "ﬁ",
             "x²", "<", ">", "|", "{", "}", "$", "#", "\\", "\"", "`"]
    cases = []
    for _ in range(60):
        n = rng.randint(2, 12)
        cases.append("".join(rng.choice(atoms) for _ in range(n)))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    cases = HAND_WRITTEN + PARAGRAPHS + generated_cases(random.Random(1234))
    seen = set()
    with open(args.out, "w", encoding="ascii") as out:
        for text in cases:
            if text in seen:
                continue
            seen.add(text)
            data = text.encode("utf-8")
            ids = llm.tokenize(data, add_bos=False, special=True)
            out.write("%s\t%s\n" % (data.hex(), " ".join(map(str, ids))))
    print("wrote %d cases to %s" % (len(seen), args.out))


if __name__ == "__main__":
    main()
