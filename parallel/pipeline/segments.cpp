// Cutting a transfer into segments (see segments.h).
#include "parallel/pipeline/segments.h"

#include <algorithm>

#include "core/error.h"

namespace h2::parallel::pipeline {

std::vector<std::pair<int64_t, int64_t>> transfer_segments(int64_t tokens, int64_t token_bytes,
                                                           size_t segment_bytes, int max_segments) {
  H2_CHECK(tokens >= 0 && token_bytes > 0 && max_segments > 0,
           "transfer segments of {} tokens of {} bytes, at most {}", tokens, token_bytes,
           max_segments);
  int64_t per_segment = tokens;
  if (segment_bytes > 0) per_segment = std::max<int64_t>(1, int64_t(segment_bytes) / token_bytes);
  per_segment = std::max(per_segment, (tokens + max_segments - 1) / max_segments);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t t = 0; t < tokens; t += per_segment)
    ranges.push_back({t, std::min(tokens, t + per_segment)});
  return ranges;
}

}  // namespace h2::parallel::pipeline
