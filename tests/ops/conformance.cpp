// The conformance fixture's helpers, its instantiation over one device per chip type and every
// dtype, and a check that every op in core/ops.def has at least one conformance case.
#include "tests/ops/conformance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "backends/registry.h"
#include "core/half_float.h"
#include "core/tensor_host.h"

namespace h2::test {

Runtime& shared_runtime() {
  static std::unique_ptr<Runtime> runtime = [] {
    RuntimeOptions options = RuntimeOptions::from_env();
    options.vchip_time_scale = 0;  // no pacing sleeps in tests
    return create_runtime(options);
  }();
  return *runtime;
}

std::vector<Target> all_targets() {
  std::vector<Target> targets;
  std::set<std::string> chip_types;
  for (Device* device : shared_runtime().devices()) {
    // Devices of one chip type run the same kernels: the second chip-a adds time, not coverage.
    if (!chip_types.insert(device->props().name).second) continue;
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      targets.push_back({device->str(), dtype});
  }
  return targets;
}

void PrintTo(const Target& target, std::ostream* os) {
  *os << target.device << " " << dtype_name(target.dtype);
}

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(x));
    case DType::f16:
      return f16_to_f32(f32_to_f16(x));
    default:
      return x;
  }
}

ref::Vec to_double(const std::vector<float>& v) {
  return ref::Vec(v.begin(), v.end());
}

std::string OpTestBase::context() const {
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? info->name() : "?";
  name = name.substr(0, name.find('/'));
  return fmt::format("{} on {} ({}) {}", name, dev().str(), dev().props().name, dtype_name(dt()));
}

std::vector<float> OpTestBase::rand(int64_t n, float lo, float hi) {
  return rand(n, lo, hi, dt());
}

std::vector<float> OpTestBase::rand(int64_t n, float lo, float hi, DType dtype) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = round_to(dtype, dist(rng_));
  return v;
}

std::vector<int64_t> OpTestBase::rand_ids(int64_t n, int64_t bound) {
  std::uniform_int_distribution<int64_t> dist(0, bound - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = dist(rng_);
  return v;
}

Tensor OpTestBase::upload(const std::vector<float>& values, const Shape& shape, DType dtype) const {
  return tensor_from_floats(values, shape, dtype, dev());
}

Tensor OpTestBase::upload(const std::vector<float>& values, const Shape& shape) const {
  return upload(values, shape, dt());
}

Tensor OpTestBase::ids(const std::vector<int64_t>& values, const Shape& shape, DType dtype) const {
  return tensor_from_ints(values, shape, dtype, dev());
}

Tensor OpTestBase::nans(const Shape& shape, DType dtype) const {
  std::vector<float> v(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN());
  return upload(v, shape, dtype);
}

void OpTestBase::expect_untouched(const std::string& what, const Tensor& t) {
  const std::vector<float> got = tensor_to_floats(t);
  const auto written = std::find_if(got.begin(), got.end(), [](float x) { return x == x; });
  EXPECT_EQ(written, got.end()) << context() << ": " << what << ": element "
                                << (written - got.begin()) << " of " << got.size()
                                << " outside the output view was written";
}

Tensor OpTestBase::padded(const std::vector<float>& values, const Shape& shape, DType dtype) const {
  const int64_t pad = 3;
  Shape wide = shape;
  int64_t last = shape.rank() > 0 ? shape[shape.rank() - 1] : 1;
  wide[wide.rank() - 1] = last + pad;
  std::vector<float> w(size_t(wide.numel()), std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r * last < int64_t(values.size()); ++r)
    std::copy_n(values.begin() + r * last, last, w.begin() + r * (last + pad));
  return upload(w, wide, dtype).slice(-1, 0, last);
}

Tensor OpTestBase::transposed(const std::vector<float>& values, int64_t R, int64_t C,
                              DType dtype) const {
  std::vector<float> t(values.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) t[size_t(c * R + r)] = values[size_t(r * C + c)];
  return upload(t, {C, R}, dtype).transpose(0, 1);
}

void OpTestBase::expect_close(const std::string& what, const Tensor& got, const ref::Vec& ref) {
  expect_close(what, got, ref, default_tolerance(got.dtype()));
}

void OpTestBase::expect_close(const std::string& what, const Tensor& got, const ref::Vec& ref,
                              Tolerance tol) {
  expect_close(what, tensor_to_floats(got), ref, got.shape(), got.dtype(), tol);
}

void OpTestBase::expect_close(const std::string& what, const std::vector<float>& got,
                              const ref::Vec& ref, const Shape& shape, DType dtype, Tolerance tol) {
  ASSERT_EQ(got.size(), ref.size()) << context() << ": output '" << what << "' size";
  Comparison c = compare(got, ref, tol);
  // Outputs well above the absolute floor must also match in aggregate: sqrt(nmse) <= rtol, so
  // that small elements hidden under atol cannot all be wrong together.
  double ref_sq = 0;
  for (double r : ref) ref_sq += std::isfinite(r) ? r * r : 0.0;
  bool signal = ref_sq > double(ref.size()) * (10 * tol.atol) * (10 * tol.atol);
  bool nmse_ok = !signal || c.normalized_mse <= tol.rtol * tol.rtol;
  if (c.ok && nmse_ok) return;
  if (!nmse_ok && c.ok)
    ADD_FAILURE() << context() << ": output '" << what << "' " << dtype_name(dtype) << " "
                  << shape.str() << ": normalized MSE " << c.normalized_mse << " > rtol^2 "
                  << tol.rtol * tol.rtol << " (" << c.str() << ")";
  if (c.ok) return;
  std::string first;
  int shown = 0;
  for (size_t i = size_t(c.first_mismatch); i < got.size() && shown < 5; ++i) {
    double err = std::abs(double(got[i]) - ref[i]),
           allowed = tol.atol + tol.rtol * std::abs(ref[i]);
    bool nan_ok = std::isnan(got[i]) && std::isnan(ref[i]);
    if (nan_ok || err <= allowed) continue;
    std::string index;
    int64_t rest = int64_t(i);
    for (int d = shape.rank() - 1; d >= 0; --d) {
      int64_t extent = std::max<int64_t>(shape[d], 1);
      index = fmt::format("{}{}", rest % extent, index.empty() ? "" : ", " + index);
      rest /= extent;
    }
    first += fmt::format("\n    [{}] ({}): got {:.7g}, ref {:.7g}, |err| {:.3g} > allowed {:.3g}",
                         i, index, got[i], ref[i], err, allowed);
    ++shown;
  }
  ADD_FAILURE() << fmt::format("{}: output '{}' {} {} (atol {:.3g}, rtol {:.3g}): {}{}", context(),
                               what, dtype_name(dtype), shape.str(), tol.atol, tol.rtol, c.str(),
                               first);
}

Device& OpConformance::dev() const {
  return shared_runtime().device(GetParam().device);
}

bool OpConformance::supported(Op op, DType dtype) const {
  return dev().supports(op, dtype);
}

std::string OpConformance::skip_message(Op op, DType dtype) const {
  return fmt::format("SKIPPED: {} for {} is not supported on {} ({})", op_name(op),
                     dtype_name(dtype), dev().str(), dev().props().name);
}

namespace {

std::string target_name(const testing::TestParamInfo<Target>& info) {
  std::string name = info.param.device + "_" + std::string(dtype_name(info.param.dtype));
  std::replace(name.begin(), name.end(), ':', '_');
  return name;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Devices, OpConformance, testing::ValuesIn(all_targets()), target_name);

// Case names are <op>_<case>; the longest op name that prefixes a case names the op it covers.
TEST(OpConformanceCoverage, EveryOpHasACase) {
  std::vector<bool> covered(kOpCount, false);
  testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    if (std::string(suite.name()) != "Devices/OpConformance") continue;
    for (int t = 0; t < suite.total_test_count(); ++t) {
      std::string name = suite.GetTestInfo(t)->name();
      int best = -1;
      for (int op = 0; op < kOpCount; ++op) {
        std::string prefix = std::string(op_name(Op(op))) + "_";
        if (name.rfind(prefix, 0) == 0 &&
            (best < 0 || op_name(Op(op)).size() > op_name(Op(best)).size()))
          best = op;
      }
      if (best >= 0) covered[size_t(best)] = true;
    }
  }
  for (int op = 0; op < kOpCount; ++op)
    EXPECT_TRUE(covered[size_t(op)]) << "no conformance case for op " << op_name(Op(op));
}

}  // namespace h2::test
