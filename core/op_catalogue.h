// Expands core/ops.def into the Op enum and the KernelTable: one function-pointer slot and one
// supported-dtype set per op. A backend fills the slots it implements; a null slot is unsupported.
#pragma once

#include <cstdint>
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

struct KernelTable {
#define H2_OP(name, Args, layout, summary) \
  KernelFn<Args> name = nullptr;           \
  DTypeSet name##_dtypes;
#include "core/ops.def"
#undef H2_OP

  // The dtypes `op` accepts here; empty when the slot is null.
  DTypeSet dtypes(Op op) const;
};

}  // namespace h2
