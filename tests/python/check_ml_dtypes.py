#!/usr/bin/env python3
"""Checks H2's low-precision formats (core/lowp/formats.h) against the ml_dtypes package:
float8_e4m3fn, float8_e5m2, float4_e2m1fn and float8_e8m0fnu.

For each format: every code must decode to the same FP32 value, and FP32 inputs must encode to
the same code, through both the scalar reference and the batch encoder (format_probe, built from
tests/core/lowp/format_probe.cpp). The inputs are every decoded value (both signs), the midpoints
between neighbouring values (ties) and the FP32 values just beside them and beside each value,
special values, and 10^6 random FP32 values from several distributions (random bit patterns,
which include NaN, Inf, subnormals and huge values; log-uniform magnitudes over the format's
range and beyond; normal and uniform values). All NaN codes count as equal.

ml_dtypes' casts do not saturate, so they are compared with Overflow::standard. Where they differ
from H2 (documented in core/lowp/formats.h):
  - float4_e2m1fn has no NaN: ml_dtypes turns NaN into a zero of the opposite sign (+NaN -> -0,
    -NaN -> +0); H2 gives +6 (code 0x7), as CUDA's __nv_cvt_float_to_fp4 does. NaN inputs are
    left out of the E2M1 comparison; the script reports what ml_dtypes gave for them.
    Inf and finite overflow saturate to +-6 in both.
  - Overflow::saturate (not compared with ml_dtypes): the script checks instead that it gives the
    standard code except where the standard one is an overflow (NaN or Inf from a non-NaN
    input), where it gives +-max_finite (E8M0: 2^127, or for zero and negative inputs, which have
    no E8M0 code, the code of |x| and 2^-127 for zero).

Usage: check_ml_dtypes.py FORMAT_PROBE
Exits 0 on agreement, 1 on a difference, 77 (skipped) where numpy or ml_dtypes is missing (1 in CI).
"""

import os
import subprocess
import sys
import tempfile

from skip_or_fail import skip_or_fail

try:
    import ml_dtypes
    import numpy as np
except ImportError as error:
    skip_or_fail("check_ml_dtypes", f"{error}; scripts/test.sh installs ml_dtypes into build/venv-test")

FORMATS = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e8m0": ml_dtypes.float8_e8m0fnu,
}
CODE_COUNT = {"e4m3": 256, "e5m2": 256, "e2m1": 16, "e8m0": 256}
MAX_CODE = {"e4m3": 0x7E, "e5m2": 0x7B, "e2m1": 0x7, "e8m0": 0xFE}
SIGN_BIT = {"e4m3": 0x80, "e5m2": 0x80, "e2m1": 0x8, "e8m0": 0}
RANDOM_INPUTS = 1_000_000


class Probe:
    def __init__(self, path, folder):
        self.path = path
        self.folder = folder

    def decode_table(self, fmt):
        out = os.path.join(self.folder, "table.f32")
        subprocess.run([self.path, "decode", fmt, out], check=True)
        return np.fromfile(out, dtype="<f4")

    def encode(self, fmt, x, overflow, path):
        src = os.path.join(self.folder, "in.f32")
        out = os.path.join(self.folder, "out.u8")
        x.astype("<f4").tofile(src)
        subprocess.run([self.path, "encode", fmt, overflow, path, src, out], check=True)
        return np.fromfile(out, dtype=np.uint8)


def ml_codes(fmt, x):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(FORMATS[fmt]).view(np.uint8)


def ml_decode(fmt, codes):
    return codes.astype(np.uint8).view(FORMATS[fmt]).astype(np.float32)


def same_bits_or_nan(a, b):
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def f32(values):
    with np.errstate(over="ignore"):  # values beyond FP32's range become +-Inf, on purpose
        return np.asarray(values, dtype=np.float32)


def structured_inputs(fmt):
    """Every value, the ties between neighbours, and the FP32 values beside both."""
    values = ml_decode(fmt, np.arange(CODE_COUNT[fmt]))
    finite = np.unique(values[np.isfinite(values)].astype(np.float64))
    ties = f32((finite[1:] + finite[:-1]) / 2)
    points = np.concatenate([f32(finite), ties])
    beside = np.concatenate(
        [np.nextafter(points, f32(np.inf)), np.nextafter(points, f32(-np.inf))]
    )
    specials = f32([0.0, np.inf, np.nan, 3.4028235e38, 1.4e-45, 1.1754944e-38, 5.877472e-39])
    base = np.concatenate([points, beside, specials])
    return np.concatenate([base, -base])


def random_inputs(fmt, rng):
    values = ml_decode(fmt, np.arange(CODE_COUNT[fmt]))
    finite = np.abs(values[np.isfinite(values) & (values != 0)].astype(np.float64))
    lo, hi = np.log2(finite.min()), np.log2(finite.max())
    quarter = RANDOM_INPUTS // 4
    sign = np.where(rng.random(quarter) < 0.5, -1.0, 1.0)
    bit_patterns = rng.integers(0, 2**32, size=quarter, dtype=np.uint64).astype(np.uint32)
    log_uniform = sign * np.exp2(rng.uniform(lo - 6, hi + 3, size=quarter))
    scales = np.exp2(rng.integers(int(lo), int(hi) + 2, size=quarter))
    normal = rng.standard_normal(quarter) * scales
    uniform = rng.uniform(-2 * finite.max(), 2 * finite.max(), size=RANDOM_INPUTS - 3 * quarter)
    return np.concatenate(
        [bit_patterns.view(np.float32), f32(log_uniform), f32(normal), f32(uniform)]
    )


def report_mismatch(what, fmt, x, ours, theirs, mismatch):
    index = np.flatnonzero(mismatch)
    print(f"check_ml_dtypes: {fmt}: {what}: {index.size} of {x.size} differ; first ones:")
    for i in index[:10]:
        bits = int(x.view(np.uint32)[i])
        print(f"  x={x[i]!r} (0x{bits:08x}): H2 0x{int(ours[i]):02x}, ml_dtypes 0x{int(theirs[i]):02x}")


def check_decode(probe, fmt):
    n = CODE_COUNT[fmt]
    ours = probe.decode_table(fmt)[:n]
    theirs = ml_decode(fmt, np.arange(n))
    mismatch = ~same_bits_or_nan(ours, theirs)
    if mismatch.any():
        report_mismatch("decode", fmt, np.arange(n, dtype=np.float32), ours, theirs, mismatch)
        return False
    return True


def codes_agree(fmt, x, ours, theirs):
    """Per element: the same code, or both NaN. E2M1 NaN inputs are left out (see above)."""
    if fmt == "e2m1":
        return (ours == theirs) | np.isnan(x)
    both_nan = np.isnan(ml_decode(fmt, ours)) & np.isnan(ml_decode(fmt, theirs))
    return (ours == theirs) | both_nan


def expected_saturating(fmt, x, standard):
    """What Overflow::saturate gives, from the standard codes."""
    overflowed = np.isnan(ml_decode(fmt, standard)) | np.isinf(ml_decode(fmt, standard))
    overflowed &= ~np.isnan(x)
    if fmt == "e8m0":
        with np.errstate(invalid="ignore", over="ignore"):
            of_magnitude = ml_codes(fmt, np.abs(x))
        of_magnitude = np.where(x == 0, 0, of_magnitude)
        of_magnitude = np.where(of_magnitude == 0xFF, MAX_CODE[fmt], of_magnitude)
        return np.where(overflowed, of_magnitude, standard).astype(np.uint8)
    sign = np.where(np.signbit(x), SIGN_BIT[fmt], 0)
    return np.where(overflowed, MAX_CODE[fmt] | sign, standard).astype(np.uint8)


def check_encode(probe, fmt, x):
    theirs = ml_codes(fmt, x)
    paths = ["scalar"] if fmt == "e8m0" else ["scalar", "batch"]
    ok = True
    for path in paths:
        ours = probe.encode(fmt, x, "standard", path)
        agree = codes_agree(fmt, x, ours, theirs)
        if not agree.all():
            report_mismatch(f"encode ({path}, standard)", fmt, x, ours, theirs, ~agree)
            ok = False
        saturating = probe.encode(fmt, x, "saturate", path)
        expected = expected_saturating(fmt, x, ours)
        agree = (saturating == expected) | (np.isnan(x) & (saturating == ours))
        if not agree.all():
            report_mismatch(f"encode ({path}, saturate)", fmt, x, saturating, expected, ~agree)
            ok = False
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rng = np.random.default_rng(20250101)
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        probe = Probe(sys.argv[1], folder)
        for fmt in FORMATS:
            x = np.concatenate([structured_inputs(fmt), random_inputs(fmt, rng)])
            fmt_ok = check_decode(probe, fmt) and check_encode(probe, fmt, x)
            ok &= fmt_ok
            note = ""
            if fmt == "e2m1":
                nan_codes = np.unique(ml_codes(fmt, x[np.isnan(x)]))
                note = f"; NaN inputs left out (ml_dtypes gave codes {nan_codes.tolist()}, H2 gives 0x7)"
            status = "agree" if fmt_ok else "DIFFER"
            print(
                f"check_ml_dtypes: {fmt} ({FORMATS[fmt].__name__}): {CODE_COUNT[fmt]} codes and "
                f"{x.size} inputs {status}{note}"
            )
    print(f"check_ml_dtypes: ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
