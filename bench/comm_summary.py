#!/usr/bin/env python3
"""Medians of bench/comm_bench.sh's runs, as a markdown table.

Reads OUT_DIR/SIDE.TEST.npN.ROUND.txt: nccl-tests tables from `h2 comm-bench` (SIDE h2) and
h2_peer_mpi (SIDE mpi), and ucx_perftest's output (ucx.taglat). Per run it takes the
out-of-place bus bandwidth of the 64 MiB all_reduce row, the out-of-place time of the 8 B
sendrecv row, and ucx_perftest's average tag latency ("Final:" line); prints the median of each
over the runs with the run count, and the ratios the acceptance criteria name (H2 / Open MPI
bus bandwidth; H2 sendrecv latency / ucx_perftest tag latency). From the small all-reduce runs
(SIDE.small) it prints the out-of-place time per size, 8 B to 4 KiB, medians side by side, and
from SIDE.barrier the barrier's time per call.
Usage: bench/comm_summary.py OUT_DIR
"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

NAME = re.compile(r"^(h2|mpi|ucx)\.(allreduce|small|barrier|sendrecv|taglat)\.np(\d+)\.(\d+)\.txt$")


def table_rows(text):
    """Row size (bytes) -> the row's columns, from an nccl-tests table."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.startswith("#") or len(fields) < 13 or not fields[0].isdigit():
            continue
        rows[int(fields[0])] = fields
    return rows


def figure(test, text):
    """The run's figure, or None when the run has none (it failed or was cut short)."""
    if test == "taglat":
        for line in text.splitlines():
            if line.startswith("Final:"):
                return float(line.split()[3])  # iterations, p50, average, overall, ...
        return None
    rows = table_rows(text)
    if test == "small":  # size -> out-of-place time (us)
        times = {}
        for size, fields in rows.items():
            try:
                times[size] = float(fields[5])
            except ValueError:
                pass
        return times or None
    try:
        if test == "allreduce":
            return float(rows[64 << 20][7])  # out-of-place busbw (GB/s)
        return float(rows[8][5])  # out-of-place time (us) of the 8 B row: sendrecv, barrier
    except (KeyError, ValueError):
        return None


def print_small_table(runs, all_ranks):
    """Small all-reduce: per size and rank count, median out-of-place time of each side."""
    columns = [r for r in all_ranks if runs.get(("h2", "small", r)) or runs.get(("mpi", "small", r))]
    if not columns:
        return
    sizes = sorted({size for (side, test, r), tables in runs.items() if test == "small"
                    for table in tables for size in table})

    def med(side, ranks, size):
        values = [t[size] for t in runs.get((side, "small", ranks), []) if size in t]
        return (statistics.median(values), len(values)) if values else (None, 0)

    header = "| bytes |" + "".join(f" H2 {r} ranks | Open MPI {r} ranks | H2 / MPI |" for r in columns)
    print("\nSmall all-reduce, f32, out of place (median time per call, us; runs in parentheses):\n")
    print(header)
    print("|---:|" + "---:|---:|---:|" * len(columns))
    for size in sizes:
        cells = []
        for r in columns:
            h2, nh2 = med("h2", r, size)
            mpi, nmpi = med("mpi", r, size)
            ratio = f"{h2 / mpi:.2f}" if h2 and mpi else "-"
            cells += [f"{h2:.2f} ({nh2})" if h2 else "-", f"{mpi:.2f} ({nmpi})" if mpi else "-", ratio]
        print(f"| {size} | " + " | ".join(cells) + " |")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = defaultdict(list)  # (side, test, ranks) -> figures
    missing = []
    for path in sorted(Path(sys.argv[1]).iterdir()):
        m = NAME.match(path.name)
        if not m:
            continue
        side, test, ranks = m.group(1), m.group(2), int(m.group(3))
        value = figure(test, path.read_text(errors="replace"))
        if value is None:
            missing.append(path.name)
        else:
            runs[(side, test, ranks)].append(value)

    def med(side, test, ranks):
        values = runs.get((side, test, ranks))
        return (statistics.median(values), len(values)) if values else (None, 0)

    def cell(value, count, digits):
        return "-" if value is None else f"{value:.{digits}f} ({count})"

    print("| figure | ranks | H2 | Open MPI | ucx_perftest | ratio |")
    print("|---|---|---|---|---|---|")
    all_ranks = sorted({r for (_, _, r) in runs})
    ucx, nucx = med("ucx", "taglat", 2)

    def rows(test, label, ucx_ratio=False):
        """One row per rank count: H2's and Open MPI's medians of `test` and their ratios."""
        for ranks in all_ranks:
            h2, nh2 = med("h2", test, ranks)
            mpi, nmpi = med("mpi", test, ranks)
            if h2 is None and mpi is None:
                continue
            ratios = []
            if ucx_ratio and h2 and ucx and ranks == 2:  # ucx_perftest runs two processes
                ratios.append(f"H2/ucx {h2 / ucx:.2f}x")
            if h2 and mpi:
                ratios.append(f"H2/MPI {h2 / mpi:.2f}x")
            print(f"| {label} | {ranks} | {cell(h2, nh2, 2)} | {cell(mpi, nmpi, 2)} | - | "
                  f"{', '.join(ratios) or '-'} |")

    rows("allreduce", "all_reduce 64 MiB f32 busbw (GB/s)")
    rows("sendrecv", "sendrecv 8 B latency (us)", ucx_ratio=True)
    rows("barrier", "barrier latency (us)")
    if ucx is not None:
        print(f"| ucx_perftest tag_lat 8 B, UCX_TLS=sm (us) | 2 | - | - | {cell(ucx, nucx, 3)} | - |")
    print("\nMedians over runs (run count in parentheses). busbw: out-of-place column of the "
          "64 MiB row; latency: out-of-place time of the 8 B sendrecv row (ring: send to r+1, "
          "receive from r-1); ucx_perftest: average one-way tag latency.")
    print_small_table(runs, all_ranks)
    if missing:
        print(f"\nRuns without the figure (failed or cut short): {', '.join(missing)}")


if __name__ == "__main__":
    main()
