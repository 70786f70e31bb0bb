// Typed element access for the collective tests (independent of the code under test).
#include "values.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/tensor_host.h"

namespace h2::comm::testing {
Tensor make_tensor(const std::vector<double>& values, DType dtype, Device& cpu) {
  Tensor t = Tensor::empty(Shape{int64_t(values.size())}, dtype, cpu);
  for (size_t i = 0; i < values.size(); ++i)
    store_host_element(t.data(), dtype, int64_t(i), values[i]);
  return t;
}

std::vector<double> read_tensor(const Tensor& tensor) {
  const Tensor c = tensor.contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    out[size_t(i)] = load_host_element(c.data(), c.dtype(), i);
  return out;
}

void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what,
                   double rtol) {
  const std::vector<double> values = read_tensor(got);
  H2_CHECK(values.size() == want.size(), "{}: {} elements, expected {}", what, values.size(),
           want.size());
  for (size_t i = 0; i < values.size(); ++i)
    if (std::abs(values[i] - want[i]) > rtol * std::abs(want[i]))
      H2_THROW(Error, "{}: element {} is {}, expected {}", what, i, values[i], want[i]);
}

}  // namespace h2::comm::testing
