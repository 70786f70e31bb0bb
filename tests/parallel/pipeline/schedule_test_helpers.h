// Shared helpers of the pipeline schedule tests: the (p, m, v) shapes they sweep, counting helpers,
// and an assertion that prints the validator's report.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/validator.h"

namespace h2::parallel::pipeline::test_helpers {

struct Shape {
  int ranks;
  int microbatches;
};

// p in {2, 3, 4}, m in {p, 2p, 8}, plus the one-rank and fewer-micro-batches-than-ranks corners.
inline std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int p : {2, 3, 4}) {
    out.push_back({p, p});
    out.push_back({p, 2 * p});
    if (2 * p != 8) out.push_back({p, 8});
  }
  out.push_back({1, 3});
  out.push_back({4, 2});
  return out;
}

// Interleaved shapes: m divisible by p, v in {2, 3}.
struct InterleavedShape {
  int ranks;
  int chunks;
  int microbatches;
};
inline std::vector<InterleavedShape> interleaved_shapes() {
  std::vector<InterleavedShape> out;
  for (int p : {2, 3, 4}) {
    for (int v : {2, 3}) {
      out.push_back({p, v, p});
      out.push_back({p, v, 2 * p});
      if (8 % p == 0 && 2 * p != 8) out.push_back({p, v, 8});
    }
  }
  return out;
}

// Forwards before the rank's first backward (B or I): the warm-up plus the first forward of the
// steady phase, when there is one.
inline int forwards_before_first_backward(const std::vector<Action>& list) {
  int n = 0;
  for (const Action& a : list) {
    if (a.kind == ActionKind::B || a.kind == ActionKind::I) break;
    n += a.kind == ActionKind::F ? 1 : 0;
  }
  return n;
}

// Checks that after `warmup` forwards the list alternates forward / backward until the
// forwards run out (the 1F1B steady phase), and that no backward comes earlier.
inline ::testing::AssertionResult has_warmup(const std::vector<Action>& list, int warmup) {
  size_t i = 0;
  for (; i < list.size() && list[i].kind == ActionKind::F; ++i) {
  }
  const int forwards = static_cast<int>(i);
  int total_forwards = 0;
  for (const Action& a : list) total_forwards += a.kind == ActionKind::F ? 1 : 0;
  const int want = std::min(warmup + 1, total_forwards);
  if (forwards != want) {
    return ::testing::AssertionFailure() << forwards << " forwards before the first backward, want "
                                         << want << " (warm-up " << warmup << ")";
  }
  for (size_t k = static_cast<size_t>(warmup); k + 1 < list.size(); k += 2) {
    if (list[k].kind != ActionKind::F) break;  // cool-down
    if (list[k + 1].kind == ActionKind::F) {
      return ::testing::AssertionFailure() << "two forwards in the steady phase at " << k;
    }
  }
  return ::testing::AssertionSuccess();
}

inline int count(const Schedule& s, ActionKind kind) {
  int n = 0;
  for (const auto& list : s.per_rank) {
    for (const Action& a : list) n += a.kind == kind ? 1 : 0;
  }
  return n;
}

// True when some message names the rank and contains every fragment.
inline bool has_error(const ValidationReport& report, int rank,
                      const std::vector<std::string>& fragments) {
  for (const ValidationError& e : report.errors) {
    if (e.rank != rank || e.message.find("rank " + std::to_string(rank)) == std::string::npos) {
      continue;
    }
    bool all = true;
    for (const std::string& f : fragments) all = all && e.message.find(f) != std::string::npos;
    if (all) return true;
  }
  return false;
}

// EXPECT_TRUE(is_valid(schedule)) prints the validator's report on failure.
inline ::testing::AssertionResult is_valid(const Schedule& s, const ValidateOptions& options = {}) {
  const ValidationReport report = validate(s, options);
  if (report.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << report.to_string();
}

}  // namespace h2::parallel::pipeline::test_helpers

namespace h2::parallel::pipeline {
// GoogleTest prints actions in their text form.
inline void PrintTo(const Action& a, std::ostream* os) {
  *os << to_string(a);
}
}  // namespace h2::parallel::pipeline
