// Test values for collectives: rank r's element i is small_value(r, i), an integer from 1 to 5
// that every dtype holds exactly, so sums over up to 8 ranks are exact too and the expected
// result of every collective is known in closed form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace h2::comm::testing {

inline double small_value(int rank, int64_t i) {
  return double((rank + i) % 5 + 1);
}

// A contiguous CPU tensor of `dtype` with values[i] at element i.
Tensor make_tensor(const std::vector<double>& values, DType dtype, Device& cpu);
// Element i of any CPU tensor (strided allowed) as double.
std::vector<double> read_tensor(const Tensor& tensor);
// Throws h2::Error naming `what`, the first mismatching index and both values unless every
// |got - want| <= rtol * |want| (0: exact).
void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what,
                   double rtol = 0);

}  // namespace h2::comm::testing
