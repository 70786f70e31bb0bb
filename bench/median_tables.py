#!/usr/bin/env python3
"""Merges several runs of one benchmark into one report: every numeric cell of every markdown
table (and every number on a "One step's GEMMs", "Measured peak" or "slow / fast" line) becomes
the median of that cell over the runs. The runs must print the same tables in the same order.
Usage: median_tables.py run1.md run2.md ... > merged.md"""
import re
import statistics
import sys

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MERGED_LINES = ("|", "One step's GEMMs", "Measured peak", "slow / fast")


def merge_line(lines):
    first = lines[0]
    if not first.startswith(MERGED_LINES) or first.startswith("|---"):
        return first
    if first.startswith("|"):
        cells = [line.strip().strip("|").split("|") for line in lines]
        if len({len(c) for c in cells}) != 1:
            return first
        out = []
        for column in zip(*cells):
            out.append(merge_cell(column))
        return "|" + "|".join(out) + "|"
    return merge_cell(lines)


def merge_cell(texts):
    """Replaces each number of texts[0] by the median of that number over texts, when every
    text has the same words around its numbers (so labels like 'B=2 T=256' stay as they are)."""
    shapes = {NUMBER.sub("#", t) for t in texts}
    numbers = [NUMBER.findall(t) for t in texts]
    if len(shapes) != 1 or len(texts) == 1 or all(n == numbers[0] for n in numbers):
        return texts[0]
    parts = NUMBER.split(texts[0])
    out = parts[0]
    for i in range(len(numbers[0])):
        values = [float(n[i]) for n in numbers]
        decimals = len(numbers[0][i].split(".")[1]) if "." in numbers[0][i] else 0
        out += f"{statistics.median(values):.{decimals}f}" + parts[i + 1]
    return out


def main():
    runs = [open(path).read().splitlines() for path in sys.argv[1:]]
    if not runs:
        sys.exit(__doc__)
    if len({len(r) for r in runs}) != 1:
        sys.exit("runs differ in length: not the same tables")
    print(f"<!-- median over {len(runs)} runs -->")
    for lines in zip(*runs):
        print(merge_line(list(lines)))


if __name__ == "__main__":
    main()
