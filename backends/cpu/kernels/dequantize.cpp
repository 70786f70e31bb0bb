// CPU dequantize: out (R, K) = deq(q), element = decode(code) * its block's FP32 scale, written in
// out's dtype (f32, bf16 or f16). Rows in parallel, each decoded into an FP32 row buffer first.
#include <vector>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/element.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/quant_operand.h"
#include "core/error.h"
#include "core/lowp/quant_check.h"

namespace h2::cpu {

void dequantize(const DequantizeArgs& args, Stream&) {
  lowp::check_qtensor(args.q, "dequantize", "q");
  const Tensor& out = args.out;
  H2_CHECK(out.defined() && out.rank() == 2 && out.size(0) == args.q.rows() &&
               out.size(1) == args.q.cols(),
           "cpu dequantize: out {} must have the codes' shape {}", out.str(),
           args.q.codes.shape().str());
  check_float(out, "dequantize", "out");
  const int64_t R = args.q.rows(), K = args.q.cols();
  if (R == 0 || K == 0) return;
  const QuantOperand q(args.q);
  visit_float_dtype(out.dtype(), "dequantize", [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data_as<T>();
    parallel_for(R, K * 2, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t r = r0; r < r1; ++r) {
        q.decode_row(r, 0, K, row.data());
        from_floats(row.data(), K, dst + r * K);
      }
    });
  });
}

}  // namespace h2::cpu
