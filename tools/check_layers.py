#!/usr/bin/env python3
"""Checks the code against the layer graph written down once, in docs/architecture.md.

The graph is the fenced block between the markers `<!-- layers:begin -->` and
`<!-- layers:end -->`: one line per folder, `folder: the folders it may use`. A file belongs to
the longest folder of the table that contains it; it may include headers of its own folder and of
the folders its line lists, and its folder's CMake targets may link only targets defined in those
folders. `*` allows everything (the command line, tests, benchmarks). Every source file must
belong to a folder of the table, so a new folder cannot slip past the rules.

Usage: tools/check_layers.py [--self-test]
  Prints each violation (file:line, what it uses, what its folder may use) and exits 1 if there is
  any. --self-test plants an upward include and an upward link in memory and fails unless both
  are reported, then checks the real tree.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = "docs/architecture.md"
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".h.in")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
LINK = re.compile(r"target_link_libraries\s*\(\s*([\w-]+)([^)]*)\)", re.S)
DEFINE = re.compile(r"(?:add_library|add_executable)\s*\(\s*([\w-]+)|h2_add_backend\s*\(\s*(\w+)")


def read_graph(doc_text):
    """{folder: set of allowed folders or {'*'}} from the marked block of the architecture doc."""
    block = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", doc_text, re.S)
    if not block:
        raise SystemExit(f"check_layers: no <!-- layers:begin/end --> block in {DOC}")
    graph = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("```"):
            continue
        folder, _, deps = line.partition(":")
        graph[folder.strip()] = set(deps.split())
    for folder, deps in graph.items():
        unknown = [d for d in deps if d != "*" and d not in graph]
        if unknown:
            raise SystemExit(f"check_layers: {DOC}: '{folder}' lists unknown folders {unknown}")
    return graph


def folder_of(path, graph):
    """The longest folder of the graph containing `path` (None: none does)."""
    best = None
    for folder in graph:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def allowed(user, used, graph):
    deps = graph[user]
    return used == user or used in deps or "*" in deps


def check(files, graph):
    """files: {path: text} (sources and CMakeLists.txt). Returns a list of violation strings."""
    problems = []
    targets = {}  # CMake target -> folder defining it
    for path, text in files.items():
        if os.path.basename(path) != "CMakeLists.txt":
            continue
        folder = folder_of(os.path.dirname(path), graph)
        for m in DEFINE.finditer(text):
            name = m.group(1) or f"h2_backend_{m.group(2)}"
            targets[name] = folder
    for path, text in sorted(files.items()):
        folder = folder_of(path, graph)
        is_cmake = os.path.basename(path) == "CMakeLists.txt"
        if folder is None:
            if not is_cmake or os.path.dirname(path):
                problems.append(f"{path}: its folder is not in the layer table of {DOC}")
            continue
        if is_cmake:
            for m in LINK.finditer(text):
                if targets.get(m.group(1)) != folder:
                    continue  # another folder's target (or a test's): checked where defined
                for lib in re.findall(r"\bh2_[\w]+", m.group(2)):
                    used = targets.get(lib)
                    if used and not allowed(folder, used, graph):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(f"{path}:{line}: {m.group(1)} links {lib} ({used}); "
                                        f"{folder} may use only: {' '.join(sorted(graph[folder])) or 'nothing'}")
            continue
        for m in INCLUDE.finditer(text):
            header = m.group(1)
            used = folder_of(header, graph)
            if used is None or allowed(folder, used, graph):
                continue  # a generated or local header
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{path}:{line}: includes {header} ({used}); "
                            f"{folder} may use only: {' '.join(sorted(graph[folder])) or 'nothing'}")
    return problems


def tree_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    files = {}
    for path in listed:
        name = os.path.basename(path)
        if (name == "CMakeLists.txt" or path.endswith(SOURCE_SUFFIXES)) and \
                os.path.isfile(os.path.join(ROOT, path)):
            with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
                files[path] = f.read()
    return files


def self_test(files, graph):
    """An upward include and an upward link planted in memory must both be reported."""
    planted = dict(files)
    planted["core/planted_upward.h"] = '#pragma once\n#include "train/trainer.h"\n'
    core_cmake = planted.get("core/CMakeLists.txt", "")
    planted["core/CMakeLists.txt"] = core_cmake + "\ntarget_link_libraries(h2_core PUBLIC h2_trainer)\n"
    found = check(planted, graph)
    wanted = ["core/planted_upward.h:2: includes train/trainer.h", "links h2_trainer"]
    missing = [w for w in wanted if not any(w in p for p in found)]
    if missing:
        print(f"check_layers self-test FAILED: planted violations not reported: {missing}")
        return False
    print("check_layers self-test: the planted upward include and link are both reported")
    return True


def main():
    with open(os.path.join(ROOT, DOC), encoding="utf-8") as f:
        graph = read_graph(f.read())
    files = tree_files()
    ok = True
    if "--self-test" in sys.argv[1:]:
        ok = self_test(files, graph)
    problems = check(files, graph)
    for p in problems:
        print(p)
    if problems:
        print(f"layer rules: {len(problems)} violation(s); the allowed graph is in {DOC}")
        return 1
    print(f"layer rules: {len(files)} files, {len(graph)} folders, no upward use")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
