// Segments of a point-to-point transfer: a piece of an activation or gradient (tokens x channels)
// is cut into ranges of whole tokens of about `segment_bytes` on the wire, each converted and
// sent as its own message, so that the first bytes leave before the last are converted and the
// receiver converts each as it arrives. Both ends cut the same piece the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace h2::parallel::pipeline {

// Token ranges [begin, end) covering [0, tokens) in order: ranges of max(1, segment_bytes /
// token_bytes) tokens (the last one shorter), or one range when segment_bytes is 0; never more
// than `max_segments` (the ranges grow to ceil(tokens / max_segments) tokens). Empty for 0 tokens.
std::vector<std::pair<int64_t, int64_t>> transfer_segments(int64_t tokens, int64_t token_bytes,
                                                           size_t segment_bytes, int max_segments);

}  // namespace h2::parallel::pipeline
