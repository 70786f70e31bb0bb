// The CPU backend's kernel table: every op, for f32, bf16 and f16 storage; quantize, dequantize and
// qmatmul for FP8/FP4 codes.
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/kernels.h"

namespace h2::cpu {
namespace {

KernelTable make_table() {
  KernelTable table;
  const DTypeSet floats{DType::f32, DType::bf16, DType::f16};
#define H2_OP(name, Args, layout, summary) \
  table.name = &cpu::name;                 \
  table.name##_dtypes = floats;
#include "core/ops.def"
#undef H2_OP
  // copy and fill also move integer tensors (same dtype in and out).
  table.copy_dtypes = floats | DTypeSet{DType::i32, DType::i64, DType::u8};
  table.fill_dtypes = table.copy_dtypes;
  // quantize, dequantize and qmatmul are keyed by the codes' dtype (FP8 and FP4 elements).
  const DTypeSet codes{DType::f8e4m3, DType::f8e5m2, DType::f4e2m1};
  table.quantize_dtypes = codes;
  table.dequantize_dtypes = codes;
  table.qmatmul_dtypes = codes;
  return table;
}

}  // namespace

const KernelTable& cpu_kernel_table() {
  static const KernelTable table = make_table();
  return table;
}

}  // namespace h2::cpu
