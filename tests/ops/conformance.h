// The op conformance fixture: every TEST_P(OpConformance, <op>_<case>) runs once per registered
// device and storage dtype (f32, bf16, f16), so ctest lists one test per (case, device, dtype).
// Inputs are random values rounded to the storage dtype first; references are computed in double
// from those rounded values (tests/ops/reference.h) and judged by default_tolerance() of each
// output's dtype. Combinations a device does not support are skipped with a message, never passed.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/op_catalogue.h"
#include "core/runtime.h"
#include "core/tensor.h"
#include "core/tolerance.h"
#include "tests/ops/reference.h"

namespace h2::test {

// One shared Runtime per test process (virtual chips unpaced: vchip_time_scale = 0).
Runtime& shared_runtime();

struct Target {
  std::string device;  // spec, e.g. "vchip:2"
  DType dtype;
};
// The first registered device of each chip type (cpu:0, vchip:0 for chip-a, vchip:2 for
// chip-b, cuda:0) x {f32, bf16, f16}.
std::vector<Target> all_targets();
// "vchip:2 bf16": how gtest (and so the ctest listing) shows a parameter.
void PrintTo(const Target& target, std::ostream* os);

// Host values rounded to `dtype` (f32, bf16, f16), so that the tensor holds them exactly.
float round_to(DType dtype, float x);
ref::Vec to_double(const std::vector<float>& v);

// Shared helpers for tests that build inputs on a device and check outputs against a reference.
class OpTestBase {
 public:
  virtual ~OpTestBase() = default;

  virtual Device& dev() const = 0;
  virtual DType dt() const = 0;
  // "<test> on vchip:2 (chip-b) bf16": printed with every failure.
  std::string context() const;

  // n uniform values in [lo, hi), rounded to `dtype` (default: the target dtype).
  std::vector<float> rand(int64_t n, float lo = -1, float hi = 1);
  std::vector<float> rand(int64_t n, float lo, float hi, DType dtype);
  std::vector<int64_t> rand_ids(int64_t n, int64_t bound);
  // A contiguous tensor on dev() holding exactly `values` (already rounded).
  Tensor upload(const std::vector<float>& values, const Shape& shape, DType dtype) const;
  Tensor upload(const std::vector<float>& values, const Shape& shape) const;
  Tensor ids(const std::vector<int64_t>& values, const Shape& shape, DType dtype) const;
  // An output tensor prefilled with NaN, so elements a kernel fails to write show up.
  Tensor nans(const Shape& shape, DType dtype) const;
  // Expects every element of `t` (what lies around an output view in the tensor it was sliced
  // from, filled by nans()) still NaN: the op wrote nothing outside its view.
  void expect_untouched(const std::string& what, const Tensor& t);
  // A non-contiguous view holding `values` in row-major order of `shape`: the last dimension is
  // a slice of a wider row padded with NaN (what a fused-projection output looks like).
  Tensor padded(const std::vector<float>& values, const Shape& shape, DType dtype) const;
  // A (R, C) view that is the transpose of a contiguous (C, R) tensor.
  Tensor transposed(const std::vector<float>& values, int64_t R, int64_t C, DType dtype) const;

  // Elementwise |got - ref| <= atol + rtol*|ref| with default_tolerance(got.dtype()), reporting
  // op, device, dtype, shape and the first mismatches on failure.
  void expect_close(const std::string& what, const Tensor& got, const ref::Vec& ref);
  void expect_close(const std::string& what, const Tensor& got, const ref::Vec& ref, Tolerance tol);
  void expect_close(const std::string& what, const std::vector<float>& got, const ref::Vec& ref,
                    const Shape& shape, DType dtype, Tolerance tol);

 protected:
  std::mt19937_64 rng_{20240611};
};

class OpConformance : public testing::TestWithParam<Target>, public OpTestBase {
 public:
  Device& dev() const override;
  DType dt() const override { return GetParam().dtype; }
  bool supported(Op op, DType dtype) const;
  std::string skip_message(Op op, DType dtype) const;
};

// Skips the running test (from its body) unless dev() supports `op` for `dtype`.
#define H2_REQUIRE(op, dtype) \
  if (!supported(op, dtype)) GTEST_SKIP() << skip_message(op, dtype)
#define H2_REQUIRE_OP(op) H2_REQUIRE(op, dt())

}  // namespace h2::test
