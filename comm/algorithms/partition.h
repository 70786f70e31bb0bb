// How the ring algorithms cut a buffer: `parts` chunks as equal as possible (the first
// count % parts chunks one element longer), each cut into segments of at most `segment_elems`
// that are sent as separate messages so that reducing one segment overlaps moving the next. A
// chunk of zero elements still has one (empty) segment: every rank sends the same messages.
#pragma once

#include <algorithm>
#include <cstdint>

namespace h2::comm {

struct Partition {
  int64_t count = 0;
  int parts = 1;
  int64_t segment_elems = 1;

  int64_t begin(int chunk) const {
    const int64_t q = count / parts, rem = count % parts;
    return chunk * q + std::min<int64_t>(chunk, rem);
  }
  int64_t length(int chunk) const { return count / parts + (chunk < count % parts ? 1 : 0); }
  int segments(int chunk) const {
    return int(std::max<int64_t>(1, (length(chunk) + segment_elems - 1) / segment_elems));
  }
  // Offset and length of segment `k` inside chunk `chunk`, in elements from the buffer start.
  int64_t segment_begin(int chunk, int k) const { return begin(chunk) + k * segment_elems; }
  int64_t segment_length(int chunk, int k) const {
    return std::min(segment_elems, length(chunk) - k * segment_elems);
  }
};

inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

}  // namespace h2::comm
