// transfer_segments (parallel/pipeline/segments.h): ranges of whole tokens that cover a piece in
// order, sized from the segment bytes and the bytes per token, capped in number.
#include "parallel/pipeline/segments.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(TransferSegments, ZeroBytesIsOneMessage) {
  EXPECT_EQ(transfer_segments(100, 512, 0, 64), (Ranges{{0, 100}}));
  EXPECT_TRUE(transfer_segments(0, 512, 0, 64).empty());
  EXPECT_TRUE(transfer_segments(0, 512, 4096, 64).empty());
}

TEST(TransferSegments, WholeTokensOfAboutTheSegmentBytes) {
  // 10 tokens of 512 bytes, 2 KiB segments: 4 tokens each, the last one 2.
  EXPECT_EQ(transfer_segments(10, 512, 2048, 64), (Ranges{{0, 4}, {4, 8}, {8, 10}}));
  // 3000 bytes hold 5 whole tokens of 512 (rounded down), never a fraction of a token.
  EXPECT_EQ(transfer_segments(10, 512, 3000, 64), (Ranges{{0, 5}, {5, 10}}));
  // A segment smaller than one token still carries one.
  EXPECT_EQ(transfer_segments(3, 512, 100, 64), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  // Segments larger than the piece: one.
  EXPECT_EQ(transfer_segments(3, 512, 1 << 20, 64), (Ranges{{0, 3}}));
}

TEST(TransferSegments, NeverMoreThanTheCap) {
  // 1000 one-token segments asked, at most 64: ceil(1000 / 64) = 16 tokens each, 63 segments.
  const Ranges r = transfer_segments(1000, 4, 4, 64);
  ASSERT_EQ(r.size(), 63u);
  int64_t next = 0;
  for (const auto& [begin, end] : r) {
    EXPECT_EQ(begin, next);
    EXPECT_LE(end - begin, 16);
    next = end;
  }
  EXPECT_EQ(next, 1000);
}

TEST(TransferSegments, RefusesNonsense) {
  EXPECT_THROW(transfer_segments(-1, 4, 0, 64), Error);
  EXPECT_THROW(transfer_segments(10, 0, 0, 64), Error);
  EXPECT_THROW(transfer_segments(10, 4, 0, 0), Error);
}

}  // namespace
}  // namespace h2::parallel::pipeline
