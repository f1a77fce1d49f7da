#!/usr/bin/env python3
"""Lists the C++ functions longer than N lines (default 80), longest first:
a brace-matching scan of the project's non-test, non-benchmark sources
(docs/STYLE.md asks for functions split along their seams).

  tools/dev/function_lengths.py [--root DIR] [--min N]

Each line: the function's length in lines (signature to closing brace), its
name and where it starts. A scan, not a parser: it skips preprocessor lines
(macro continuations too) and comments after code, and counts a function
from the first line of its signature.
"""
import argparse
import os
import re

SKIP_DIRS = {".git", "third_party"}
KEYWORDS = re.compile(r"(if|for|while|switch|else|do)\b")
SCOPES = re.compile(r"(namespace|extern)\b")
TYPES = re.compile(r"\b(class|struct|union|enum)\b")


def code_lines(path):
    """The file's lines, preprocessor lines (and continuations) blanked."""
    lines, continued = [], False
    with open(path, errors="replace") as f:
        for line in f.read().split("\n"):
            if continued or line.strip().startswith("#"):
                continued = line.rstrip().endswith("\\")
                lines.append("")
            else:
                lines.append(line)
    return lines


def functions(path):
    """(length, name, line) of each function defined in `path`."""
    lines = code_lines(path)
    out, start, i = [], None, 0
    while i < len(lines):
        text = lines[i].split("//")[0].strip()
        if not text:
            i += 1
            continue
        if start is None:
            start = i
        if text.endswith("{"):
            sig = " ".join(l.split("//")[0].strip() for l in lines[start:i + 1])
            head = sig.split("(")[0]
            if SCOPES.match(sig) or TYPES.search(head):
                start, i = None, i + 1  # a scope: scan inside it
                continue
            depth, end = 0, i
            for end in range(i, len(lines)):
                code = lines[end].split("//")[0]
                depth += code.count("{") - code.count("}")
                if depth <= 0:
                    break
            if ")" in sig and not KEYWORDS.match(sig) and "=" not in head:
                name = re.search(r"([\w:~<>,]+?)\s*\(", sig)
                out.append((end - start + 1, name.group(1) if name else sig[:40],
                            start + 1))
            start, i = None, end + 1
            continue
        if text.endswith((";", "}", ":")):
            start = None
        i += 1
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=".")
    p.add_argument("--min", type=int, default=80)
    args = p.parse_args()
    found = []
    for root, dirs, files in os.walk(args.root):
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIP_DIRS and not d.startswith("bazel-"))
        if os.sep + "fuzz" in root or os.sep + "testing" in root:
            continue
        for name in files:
            if (not name.endswith((".cc", ".h")) or name.endswith("_test.cc")
                    or "bench" in name):
                continue
            path = os.path.join(root, name)
            found += [(n, fn, f"{os.path.relpath(path, args.root)}:{line}")
                      for n, fn, line in functions(path)]
    for n, fn, where in sorted(found, reverse=True):
        if n > args.min:
            print(n, fn, where)


if __name__ == "__main__":
    main()
