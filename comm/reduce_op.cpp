// Names of the reduction operators, for logs, benchmark tables and config values.
#include <string_view>

#include "comm/communicator.h"

namespace h2::comm {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
    case ReduceOp::avg:
      return "avg";
  }
  return "?";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::avg})
    if (name == reduce_op_name(op)) return op;
  return std::nullopt;
}

}  // namespace h2::comm
