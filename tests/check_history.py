#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The history check: README, docs and code comments say what kvtier is and
does now, not in which numbered work period something changed.

Fails (exit 1, one file:line per hit) on numbered work periods and stop
numbers -- "session N", "sessions N-M", "Session N", "(session N)",
"stop N" -- and lab-notebook phrases (NOTEBOOK below: a variant kept
only as the story of its trial, work left to a next period) in:
  - README.md and every file under docs/ except docs/notes/ (the one
    labelled log that keeps history);
  - the comments of *.c, *.h, *.S (/* */ and //) and of *.py, *.sh, *.mk,
    Makefile and .ci/* (# to the end of the line; Python docstrings too).
Skips build*/, node_modules/ and .git. History belongs in commit messages.
Usage: tests/check_history.py [root]      check a tree (default: this one)
       tests/check_history.py --self-test  the check fails on planted lines
                                           and passes clean ones
"""
import os
import re
import sys

import check_common

# One of the words "session", "sessions", "stop", "stops", then a number.
HISTORY = re.compile(r"\b(sessions?|stops?)\s+#?\d+", re.IGNORECASE)
# Phrases of a lab notebook: the story of a variant belongs in a commit message.
NOTEBOOK = re.compile(r"\btried and (not kept|dropped)\b|\bversion tried before\b|"
                      r"\bleft for the next (session|round)\b", re.IGNORECASE)
SKIP_DIRS = {".git", "node_modules"}
C_EXT = (".c", ".h", ".S")
HASH_EXT = (".py", ".sh", ".mk")


def skipped_dir(rel):
    parts = rel.split(os.sep)
    if parts[0] == "build" or parts[0].startswith("build-"):
        return True
    if any(p in SKIP_DIRS for p in parts):
        return True
    return rel == os.path.join("docs", "notes")


def kind_of(rel):
    """'text' (every line counts), 'c' or 'hash' (comments only), or None."""
    name = os.path.basename(rel)
    if rel == "README.md" or rel.startswith("docs" + os.sep):
        return "text"
    if name.endswith(C_EXT):
        return "c"
    if name.endswith(HASH_EXT) or name == "Makefile" or \
            os.path.dirname(rel) == ".ci":
        return "hash"
    return None


def c_comments(text):
    """(line, comment text) for each line of each C comment; skips strings."""
    out, i, n, ln = [], 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            ln += 1
            i += 1
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((ln, text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k, part in enumerate(text[i:j].split("\n")):
                out.append((ln + k, part))
            ln += text.count("\n", i, j)
            i = j
        else:
            i += 1
    return out


def hash_comments(text, python):
    """(line, comment text): from a '#' that starts a word, outside quotes,
    to the end of the line; in Python also triple-quoted strings."""
    out, in_doc = [], None
    for ln, line in enumerate(text.split("\n"), 1):
        if python:
            if in_doc:
                out.append((ln, line))
                if in_doc in line:
                    in_doc = None
                continue
            s = line.lstrip()
            for q in ('"""', "'''"):
                if s.startswith(q) or s.startswith("r" + q):
                    out.append((ln, line))
                    if s.count(q) == 1:
                        in_doc = q
        quote = None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = None
                elif ch == "\\":
                    continue
            elif ch in "\"'":
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t;("):
                out.append((ln, line[i:]))
                break
    return out


def hits_in(rel, text):
    kind = kind_of(rel)
    if kind == "text":
        lines = list(enumerate(text.split("\n"), 1))
    elif kind == "c":
        lines = c_comments(text)
    elif kind == "hash":
        lines = hash_comments(text, rel.endswith(".py"))
    else:
        return []
    return [(ln, m.group(0), part.strip()) for ln, part in lines
            for m in [HISTORY.search(part) or NOTEBOOK.search(part)] if m]


def check(root, quiet=False):
    found = []
    for d, dirs, files in os.walk(root):
        reld = os.path.relpath(d, root)
        reld = "" if reld == "." else reld
        dirs[:] = sorted(x for x in dirs
                         if not skipped_dir(os.path.join(reld, x)))
        for f in sorted(files):
            rel = os.path.join(reld, f)
            if kind_of(rel) is None:
                continue
            try:
                with open(os.path.join(root, rel), encoding="utf-8",
                          errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            for ln, what, line in hits_in(rel, text):
                found.append(f"{rel}:{ln}: \"{what}\": {line[:160]}")
    if not quiet:
        for h in found:
            print(h)
        print(f"history: {'FAILED' if found else 'ok'} ({len(found)} numbered "
              "work periods or notebook phrases in README, docs or code comments)")
    return found


def self_test():
    """Small trees with one planted line each (or none): the check must agree."""
    s, p = "Sess" + "ion", "st" + "op"      # not a hit in this file itself
    k = "not " + "kept"
    cases = [
        ("clean", {"README.md": "Run make test.\n",
                   "tier/a.c": f'puts("{s} 3"); /* the step */\n',
                   "tests/x.sh": f'echo "{p} 2" # waits\n',
                   f"docs/notes/log.md": f"{s} 18: tuned\n"}, 0),
        ("README", {"README.md": f"ok\nsince {s.lower()}s 20-25\n"}, 1),
        ("docs", {"docs/a.md": f"## Step prefetch ({s.lower()} 18)\n"}, 1),
        ("C block comment", {"tier/a.c": f"int x;\n/* kept\n * since {s} 7 */\n"}, 1),
        ("C line comment", {"base/b.h": f"int y; // {p} 34\n"}, 1),
        ("shell", {"tests/t.sh": f"x=1 # CI of {p} 34\n"}, 1),
        ("Makefile", {"Makefile": f"all: # {s.lower()} 2\n"}, 1),
        ("ci", {".ci/run": f"# 33 min ({p} 32)\n"}, 1),
        ("python docstring", {"tests/c.py": f'"""Check.\n{s} 4 added it.\n"""\n'}, 1),
        ("build skipped", {"build/x.c": f"/* {s} 1 */\n"}, 0),
        ("notebook: dropped variant", {"docs/p.md": f"Tried and {k}: cooling.\n"}, 1),
        ("notebook: left over", {"tier/s.c": f"/* Left for the next {s.lower()} */\n"}, 1),
        ("notebook: the log may", {"docs/notes/log.md": f"Tried and {k}: x.\n"}, 0),
    ]
    return check_common.self_test(check, cases, lambda got, want: len(got) == want,
                                   lambda got, want: f"{len(got)} hits, want {want}")


if __name__ == "__main__":
    sys.exit(check_common.main(check, self_test, __file__))
