# SPDX-License-Identifier: MIT
"""What tests/check_layers.py and tests/check_history.py share: a self-test
that writes small trees and asks the check about each, and the command line
(no argument: the repository; --self-test; or a folder to check)."""
import os
import sys
import tempfile


def self_test(check, cases, judge, describe):
    """cases: (name, {path: text}, want); judge(problems, want) -> bool;
    describe(problems, want) -> the words after ok/WRONG."""
    bad = 0
    for name, files, want in cases:
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
                with open(os.path.join(root, rel), "w") as fh:
                    fh.write(text)
            got = check(root, quiet=True)
        ok = judge(got, want)
        print(f"self-test {name}: {'ok' if ok else 'WRONG'} ({describe(got, want)})")
        bad += not ok
    return 1 if bad else 0


def main(check, run_self_test, script):
    if sys.argv[1:] == ["--self-test"]:
        return run_self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(script), ".."))
    return 1 if check(root) else 0
