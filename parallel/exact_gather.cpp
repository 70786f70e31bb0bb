// Doubles gathered as bit patterns (see exact_gather.h).
#include "parallel/exact_gather.h"

#include <cstring>

#include "core/error.h"

namespace h2::parallel {

std::vector<std::vector<double>> gather_doubles(comm::Communicator& group, Device& host,
                                                const std::vector<double>& values) {
  const int64_t n = int64_t(values.size());
  Tensor mine = Tensor::empty({n}, DType::i64, host);
  if (n > 0) std::memcpy(mine.data(), values.data(), size_t(n) * sizeof(double));
  Tensor all = Tensor::empty({n * group.size()}, DType::i64, host);
  group.all_gather(all, mine);
  std::vector<std::vector<double>> out(size_t(group.size()), std::vector<double>(size_t(n)));
  for (int r = 0; r < group.size(); ++r)
    if (n > 0)
      std::memcpy(out[size_t(r)].data(), static_cast<const char*>(all.data()) + r * n * 8,
                  size_t(n) * sizeof(double));
  return out;
}

}  // namespace h2::parallel
