#!/usr/bin/env python3
"""Finds references to repository files that do not exist: a path in a comment, a doc or a script
that names a file which moved or never was (`core/foo.h`, `docs/bar.md`), and references to design
documents outside the repository. Data outside it (`../shared/data/...`, an optional corpus) may be
named. Prints FILE:LINE: PATH for each and exits 1 if there is any.

Usage: tools/check_paths.py
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ("core", "backends", "comm", "nn", "optim", "models", "parallel", "train", "cli", "h2run",
       "tests", "bench", "tools", "configs", "docs", "scripts", "cmake")
SUFFIX = r"(?:h|cpp|cu|cuh|md|yaml|sh|py|def|in|json|png|txt)"
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\.%s)\b" % ("|".join(TOP), SUFFIX))
OUTSIDE = re.compile(r"\.\./shared/(?!data\b)[\w./-]+")
# Files made by the build, and names that stand for any file (this script's and the layer
# check's examples).
NOT_FILES = {"backends/vchip/builtin_chips.h", "core/foo.h", "docs/bar.md", "core/planted_upward.h"}
TEXT = (".h", ".cpp", ".cu", ".cuh", ".md", ".sh", ".py", ".yaml", ".txt", ".def", ".in")


def main():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    problems = []
    for path in files:
        if not path.endswith(TEXT) or not os.path.isfile(os.path.join(ROOT, path)):
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for m in PATH.finditer(line):
                    ref = m.group(1).rstrip(".")
                    if ref in NOT_FILES or os.path.exists(os.path.join(ROOT, ref)):
                        continue
                    problems.append(f"{path}:{number}: {ref} does not exist")
                for m in OUTSIDE.finditer(line):
                    problems.append(f"{path}:{number}: {m.group(0)} is outside the repository")
    for p in problems:
        print(p)
    print(f"path references: {len(problems)} broken" if problems else
          f"path references: {len(files)} files, none broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
