// How the point-to-point transfers between pipeline groups are cut. Pieces: a group of g ranks
// splits each micro-batch's rows evenly (group_rows), and between groups of different sizes each
// rank sends the rows it holds to the ranks that own them. Segments: a piece of an activation or
// gradient (tokens x channels) is cut into ranges of whole tokens of about `segment_bytes` on
// the wire, each converted and sent as its own message, so that the first bytes leave before
// the last are converted and the receiver converts each as it arrives. Both ends cut the same
// piece the same way (the runtime and the cluster simulator alike).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace h2::parallel::pipeline {

// Rows [R k / g, R (k + 1) / g) of a micro-batch of R rows: what rank k of a group of g holds.
inline std::pair<int64_t, int64_t> group_rows(int64_t rows, int64_t k, int64_t g) {
  return {rows * k / g, rows * (k + 1) / g};
}

// Token ranges [begin, end) covering [0, tokens) in order: ranges of max(1, segment_bytes /
// token_bytes) tokens (the last one shorter), or one range when segment_bytes is 0; never more
// than `max_segments` (the ranges grow to ceil(tokens / max_segments) tokens). Empty for 0 tokens.
std::vector<std::pair<int64_t, int64_t>> transfer_segments(int64_t tokens, int64_t token_bytes,
                                                           size_t segment_bytes, int max_segments);

}  // namespace h2::parallel::pipeline
