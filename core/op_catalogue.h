// Expands core/ops.def into the Op enum and the KernelTable: one function-pointer slot and one
// supported-dtype set per op. A backend fills the slots it implements; a null slot is unsupported.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/op_args.h"

namespace h2 {

class Stream;

enum class OpLayout { kStrided, kContiguous };

enum class Op : uint16_t {
#define H2_OP(name, Args, layout, summary) name,
#include "core/ops.def"
#undef H2_OP
};

inline constexpr int kOpCount = 0
#define H2_OP(name, Args, layout, summary) +1
#include "core/ops.def"
#undef H2_OP
    ;

std::string_view op_name(Op op);
std::string_view op_summary(Op op);
OpLayout op_layout(Op op);
// Parses an op name; throws ConfigError naming the text and where it came from.
Op parse_op(std::string_view name, std::string_view source);

template <class Args>
using KernelFn = void (*)(const Args& args, Stream& stream);
// Why a kernel refuses arguments whose dtype it takes: a shape it does not implement ("head dim
// 320 > 256"). Empty when it takes them.
template <class Args>
using RefusalFn = std::string (*)(const Args& args);

struct KernelTable {
#define H2_OP(name, Args, layout, summary) \
  KernelFn<Args> name = nullptr;           \
  DTypeSet name##_dtypes;                  \
  RefusalFn<Args> name##_refusal = nullptr;
#include "core/ops.def"
#undef H2_OP

  // The dtypes `op` accepts here; empty when the slot is null.
  DTypeSet dtypes(Op op) const;
  // Why `op`'s kernel refuses `args` (a pointer to op's own Args struct); empty when it takes
  // them or has no refusal rule.
  std::string refusal(Op op, const void* args) const;
};

}  // namespace h2
