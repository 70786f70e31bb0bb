// Element-wise reductions the host collectives apply to arriving data, for every dtype a
// communicator carries. 16-bit floats are widened to f32, combined and rounded back (RNE), so
// every rank that combines the same two values gets the same bits.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "core/dtype.h"

namespace h2::comm {

// dst[i] = a[i] op b[i] for i < count; dst may alias a or b. avg combines as sum (see finish_avg).
void reduce_elements(void* dst, const void* a, const void* b, int64_t count, DType dtype,
                     ReduceOp op);
// Divides the summed data by `ranks` in place (floating dtypes only; the last step of avg).
void finish_avg(void* data, int64_t count, DType dtype, int ranks);
// Whether `op` is defined on `dtype` for collectives (avg: floating dtypes; f8/f4: none).
bool reduce_supported(DType dtype, ReduceOp op);

}  // namespace h2::comm
