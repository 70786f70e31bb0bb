// Ring reduce-scatter / all-gather with segment pipelining.
//
// Chunk schedule for rank r of n (chunks indexed mod n), after which rank r owns chunk r:
//   reduce-scatter step s = 0..n-2: send chunk r-s-1, receive chunk r-s-2 and reduce it;
//                                   the chunk reduced at step s is the one sent at step s+1.
//   all-gather    step t = 0..n-2: send chunk r-t, receive chunk r-t-1 (forwarded at t+1).
// Message steps: reduce-scatter s -> s, all-gather t -> n-1+t.
#include "comm/algorithms/ring.h"

#include <cstring>

#include "comm/algorithms/reduce_kernels.h"

namespace h2::comm {
namespace {

size_t element_size(DType dtype) {
  return size_t(dtype_storage_bytes(dtype, 1));
}

Partition make_partition(int64_t count, int parts, size_t element_bytes, size_t segment_bytes) {
  return Partition{count, parts, std::max<int64_t>(1, int64_t(segment_bytes / element_bytes))};
}

std::byte* grow(std::vector<std::byte>& scratch, size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

// Posts every segment of `chunk` of `base` as a send of step `step`.
void send_chunk(Exchange& ex, int peer, int step, const std::byte* base, const Partition& p,
                int chunk, size_t es, std::vector<OpId>& sends) {
  for (int k = 0; k < p.segments(chunk); ++k)
    sends.push_back(ex.send(peer, step, base + p.segment_begin(chunk, k) * es,
                            size_t(p.segment_length(chunk, k)) * es));
}

// The all-gather phase: forwards chunks around the ring into `out`. Step t = 0 must already
// have been sent by the caller (it owns chunk r); the received chunk of step t is sent at t+1.
void all_gather_phase(Exchange& ex, std::byte* out, const Partition& p, size_t es, int first_step,
                      std::vector<OpId>& sends) {
  const int n = ex.size(), r = ex.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  std::vector<OpId> recvs;
  for (int t = 0; t + 1 < n; ++t) {
    const int chunk = mod(r - t - 1, n);
    for (int k = 0; k < p.segments(chunk); ++k)
      recvs.push_back(ex.recv(left, first_step + t, out + p.segment_begin(chunk, k) * es,
                              size_t(p.segment_length(chunk, k)) * es));
    for (int k = 0; k < p.segments(chunk); ++k) {
      ex.wait(recvs[k]);
      if (t + 2 < n)  // forward what arrived, segment by segment
        sends.push_back(ex.send(right, first_step + t + 1, out + p.segment_begin(chunk, k) * es,
                                size_t(p.segment_length(chunk, k)) * es));
    }
    recvs.clear();
  }
  ex.wait_all(sends);
}

}  // namespace

void ring_all_reduce(Exchange& ex, std::byte* out, const std::byte* in, int64_t count, DType dtype,
                     ReduceOp op, const RingOptions& options) {
  const int n = ex.size(), r = ex.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t es = element_size(dtype);
  if (n == 1) {
    if (out != in) std::memmove(out, in, size_t(count) * es);
    return;
  }
  const Partition p = make_partition(count, n, es, options.segment_bytes);
  std::byte* incoming = grow(*options.scratch, std::max<size_t>(size_t(p.length(0)) * es, 1));

  // Reduce-scatter: each chunk but r-1 is reduced once, reading in and writing out, so out of
  // place needs no initial copy. Chunk r-1 is sent straight from in and arrives in the
  // all-gather.
  std::vector<OpId> rs_sends, ag_sends, recvs;
  send_chunk(ex, right, 0, in, p, mod(r - 1, n), es, rs_sends);
  for (int s = 0; s + 1 < n; ++s) {
    const int chunk = mod(r - s - 2, n);
    const int64_t chunk_begin = p.begin(chunk);
    for (int k = 0; k < p.segments(chunk); ++k)
      recvs.push_back(ex.recv(left, s, incoming + (p.segment_begin(chunk, k) - chunk_begin) * es,
                              size_t(p.segment_length(chunk, k)) * es));
    for (int k = 0; k < p.segments(chunk); ++k) {
      ex.wait(recvs[k]);
      const int64_t at = p.segment_begin(chunk, k), len = p.segment_length(chunk, k);
      std::byte* target = out + at * es;
      reduce_elements(target, in + at * es, incoming + (at - chunk_begin) * es, len, dtype, op);
      const bool last = s + 2 == n;  // chunk == r: fully reduced, starts the all-gather
      if (last && op == ReduceOp::avg) finish_avg(target, len, dtype, n);
      (last ? ag_sends : rs_sends)
          .push_back(ex.send(right, last ? n - 1 : s + 1, target, size_t(len) * es));
    }
    recvs.clear();
  }
  // The all-gather overwrites chunks that reduce-scatter sends may still be reading (in place).
  ex.wait_all(rs_sends);
  all_gather_phase(ex, out, p, es, n - 1, ag_sends);
}

void ring_reduce_scatter(Exchange& ex, std::byte* out, const std::byte* in, int64_t block,
                         DType dtype, ReduceOp op, const RingOptions& options) {
  const int n = ex.size(), r = ex.rank(), right = mod(r + 1, n), left = mod(r - 1, n);
  const size_t es = element_size(dtype), chunk_bytes = size_t(block) * es;
  if (n == 1) {
    if (out != in) std::memmove(out, in, chunk_bytes);
    return;
  }
  const Partition whole = make_partition(block * n, n, es, options.segment_bytes);
  // Scratch: one chunk arriving plus two alternating partial sums (one may still be sending).
  std::byte* base = grow(*options.scratch, std::max<size_t>(3 * chunk_bytes, 1));
  std::byte* incoming = base;
  std::byte* partial[2] = {base + chunk_bytes, base + 2 * chunk_bytes};

  std::vector<OpId> sends, older_sends, recvs;
  send_chunk(ex, right, 0, in, whole, mod(r - 1, n), es, sends);
  for (int s = 0; s + 1 < n; ++s) {
    const int chunk = mod(r - s - 2, n);
    const bool last = s + 2 == n;
    std::byte* target = last ? out : partial[s % 2];
    // partial[s % 2] was last read by the sends of step s - 1 (posted during step s - 2).
    ex.wait_all(older_sends);
    older_sends.swap(sends);
    for (int k = 0; k < whole.segments(chunk); ++k)
      recvs.push_back(ex.recv(left, s, incoming + k * whole.segment_elems * es,
                              size_t(whole.segment_length(chunk, k)) * es));
    for (int k = 0; k < whole.segments(chunk); ++k) {
      ex.wait(recvs[k]);
      const int64_t offset = k * whole.segment_elems, len = whole.segment_length(chunk, k);
      std::byte* dst = target + offset * es;
      reduce_elements(dst, in + (whole.begin(chunk) + offset) * es, incoming + offset * es, len,
                      dtype, op);
      if (last && op == ReduceOp::avg) finish_avg(dst, len, dtype, n);
      if (!last) sends.push_back(ex.send(right, s + 1, dst, size_t(len) * es));
    }
    recvs.clear();
  }
  ex.wait_all(older_sends);
  ex.wait_all(sends);
}

void ring_all_gather(Exchange& ex, std::byte* out, const std::byte* in, int64_t block,
                     size_t element_bytes, const RingOptions& options) {
  const int n = ex.size(), r = ex.rank();
  const Partition p = make_partition(block * n, n, element_bytes, options.segment_bytes);
  std::byte* own = out + p.begin(r) * element_bytes;
  if (own != in) std::memmove(own, in, size_t(block) * element_bytes);
  if (n == 1) return;
  std::vector<OpId> sends;
  send_chunk(ex, mod(r + 1, n), 0, out, p, r, element_bytes, sends);
  all_gather_phase(ex, out, p, element_bytes, 0, sends);
}

}  // namespace h2::comm
