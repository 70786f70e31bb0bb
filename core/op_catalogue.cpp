// Op names, summaries and layouts from core/ops.def.
#include "core/op_catalogue.h"

#include "core/error.h"

namespace h2 {
namespace {

struct OpInfo {
  std::string_view name;
  std::string_view summary;
  OpLayout layout;
};

constexpr OpLayout kStrided = OpLayout::kStrided;
constexpr OpLayout kContiguous = OpLayout::kContiguous;

constexpr OpInfo kOps[] = {
#define H2_OP(name, Args, layout, summary) {#name, summary, layout},
#include "core/ops.def"
#undef H2_OP
};

}  // namespace

std::string_view op_name(Op op) {
  return kOps[size_t(op)].name;
}
std::string_view op_summary(Op op) {
  return kOps[size_t(op)].summary;
}
OpLayout op_layout(Op op) {
  return kOps[size_t(op)].layout;
}

Op parse_op(std::string_view name, std::string_view source) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].name == name) return Op(i);
  H2_THROW(ConfigError, "{}: unknown op '{}' (see `h2 ops` for the catalogue)", source, name);
}

DTypeSet KernelTable::dtypes(Op op) const {
  switch (op) {
#define H2_OP(name, Args, layout, summary) \
  case Op::name:                           \
    return name == nullptr ? DTypeSet{} : name##_dtypes;
#include "core/ops.def"
#undef H2_OP
  }
  return {};
}

std::string KernelTable::refusal(Op op, const void* args) const {
  switch (op) {
#define H2_OP(name, Args, layout, summary)           \
  case Op::name:                                     \
    return name##_refusal == nullptr ? std::string() \
                                     : name##_refusal(*static_cast<const Args*>(args));
#include "core/ops.def"
#undef H2_OP
  }
  return {};
}

}  // namespace h2
