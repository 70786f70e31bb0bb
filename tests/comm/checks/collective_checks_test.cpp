// The argument checks every Communicator runs: each collective's element-count relation, dtype
// agreement, overlap rule and reduce-op validity, and the messages naming the collective and the
// tensors. Also the reduce-op names round trip.
#include "comm/collective_checks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/error.h"

namespace h2::comm {
namespace {

class CollectiveChecksTest : public ::testing::Test {
 protected:
  Tensor make(std::initializer_list<int64_t> shape, DType dtype = DType::f32) {
    return Tensor::empty(Shape(shape), dtype, runtime->cpu());
  }
  std::unique_ptr<Runtime> runtime = create_runtime();
};

// Runs fn, expects ErrorType, and returns its message.
template <class ErrorType, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const ErrorType& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(ReduceOp, NamesRoundTrip) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::avg})
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  EXPECT_EQ(reduce_op_name(ReduceOp::avg), "avg");
  EXPECT_EQ(parse_reduce_op("mean"), std::nullopt);
  EXPECT_EQ(parse_reduce_op(""), std::nullopt);
  EXPECT_EQ(parse_reduce_op("SUM"), std::nullopt);
}

TEST(ReduceOp, AvgIsForFloatingDtypesOnly) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2})
    EXPECT_TRUE(reduce_op_valid(ReduceOp::avg, t)) << dtype_name(t);
  for (DType t : {DType::i32, DType::i64, DType::u8}) {
    EXPECT_FALSE(reduce_op_valid(ReduceOp::avg, t)) << dtype_name(t);
    EXPECT_TRUE(reduce_op_valid(ReduceOp::sum, t)) << dtype_name(t);
    EXPECT_TRUE(reduce_op_valid(ReduceOp::max, t)) << dtype_name(t);
  }
  EXPECT_FALSE(reduce_op_valid(ReduceOp::sum, DType::f4e2m1));
}

TEST_F(CollectiveChecksTest, AllReduceNeedsEqualCountsAndDtypes) {
  Tensor a = make({4, 3}), b = make({12}), c = make({11}), h = make({12}, DType::bf16);
  EXPECT_NO_THROW(check_all_reduce(a, b, ReduceOp::sum, "test all_reduce"));
  EXPECT_NO_THROW(check_all_reduce(a, a, ReduceOp::avg, "test all_reduce"));  // in place
  std::string m = message_of<Error>([&] { check_all_reduce(c, b, ReduceOp::sum, "x all_reduce"); });
  EXPECT_NE(m.find("x all_reduce"), std::string::npos) << m;
  EXPECT_NE(m.find(c.str()), std::string::npos) << m;
  EXPECT_NE(m.find("equal element counts"), std::string::npos) << m;
  m = message_of<Error>([&] { check_all_reduce(h, b, ReduceOp::sum, "x all_reduce"); });
  EXPECT_NE(m.find("same dtype"), std::string::npos) << m;
  EXPECT_THROW(check_all_reduce(Tensor(), b, ReduceOp::sum, "x"), Error);
}

TEST_F(CollectiveChecksTest, AvgOnIntegersIsUnsupported) {
  Tensor i = make({8}, DType::i32);
  std::string m =
      message_of<UnsupportedError>([&] { check_all_reduce(i, i, ReduceOp::avg, "x all_reduce"); });
  EXPECT_NE(m.find("avg"), std::string::npos) << m;
  EXPECT_NE(m.find("i32"), std::string::npos) << m;
  EXPECT_NO_THROW(check_all_reduce(i, i, ReduceOp::max, "x all_reduce"));
  Tensor out = make({2}, DType::i64), in = make({8}, DType::i64);
  EXPECT_THROW(check_reduce_scatter(out, in, ReduceOp::avg, 0, 4, "x"), UnsupportedError);
}

TEST_F(CollectiveChecksTest, PartialOverlapIsRejectedButInPlaceIsNot) {
  Tensor buf = make({16});
  Tensor left = buf.slice(0, 0, 8), shifted = buf.slice(0, 4, 12), right = buf.slice(0, 8, 16);
  EXPECT_NO_THROW(check_all_reduce(left, right, ReduceOp::sum, "x"));
  EXPECT_NO_THROW(check_all_reduce(left, buf.slice(0, 0, 8), ReduceOp::sum, "x"));
  std::string m = message_of<Error>([&] { check_all_reduce(left, shifted, ReduceOp::sum, "x"); });
  EXPECT_NE(m.find("overlap"), std::string::npos) << m;
}

TEST_F(CollectiveChecksTest, ReduceScatterAndAllGatherScaleBySize) {
  Tensor small = make({3}), big = make({12});
  EXPECT_NO_THROW(check_reduce_scatter(small, big, ReduceOp::sum, 0, 4, "x"));
  EXPECT_NO_THROW(check_all_gather(big, small, 0, 4, "x"));
  std::string m =
      message_of<Error>([&] { check_reduce_scatter(small, big, ReduceOp::sum, 0, 3, "rs"); });
  EXPECT_NE(m.find("rs"), std::string::npos) << m;
  EXPECT_NE(m.find("size (3)"), std::string::npos) << m;
  m = message_of<Error>([&] { check_all_gather(big, small, 0, 2, "ag"); });
  EXPECT_NE(m.find(big.str()), std::string::npos) << m;
  // Zero elements are fine: every rank contributes nothing.
  EXPECT_NO_THROW(check_all_gather(make({0}), make({0}), 0, 4, "x"));
  // f4e2m1 blocks must be whole bytes.
  EXPECT_NO_THROW(check_all_gather(make({8}, DType::f4e2m1), make({2}, DType::f4e2m1), 0, 4, "x"));
  EXPECT_THROW(check_all_gather(make({4}, DType::f4e2m1), make({1}, DType::f4e2m1), 0, 4, "x"),
               Error);
}

TEST_F(CollectiveChecksTest, InPlaceGatherAndScatterUseTheRanksOwnBlock) {
  Tensor whole = make({12});
  Tensor block1 = whole.slice(0, 3, 6);  // rank 1's block of 4
  EXPECT_NO_THROW(check_all_gather(whole, block1, 1, 4, "x"));
  EXPECT_NO_THROW(check_reduce_scatter(block1, whole, ReduceOp::sum, 1, 4, "x"));
  std::string m = message_of<Error>([&] { check_all_gather(whole, block1, 2, 4, "ag"); });
  EXPECT_NE(m.find("block 2"), std::string::npos) << m;
  EXPECT_THROW(check_reduce_scatter(whole.slice(0, 4, 7), whole, ReduceOp::sum, 1, 4, "x"), Error);
  // A strided block is never the in-place case.
  Tensor grid = make({4, 3});
  EXPECT_THROW(check_all_gather(grid.view({12}), grid.transpose(0, 1).select(0, 1), 1, 4, "x"),
               Error);
}

TEST_F(CollectiveChecksTest, BroadcastNeedsARootAndInOnTheRootOnly) {
  Tensor out = make({5}), in = make({5});
  EXPECT_NO_THROW(check_broadcast(out, in, 1, 1, 2, "x"));
  EXPECT_NO_THROW(check_broadcast(out, Tensor(), 1, 0, 2, "x"));  // not the root
  EXPECT_THROW(check_broadcast(out, Tensor(), 1, 1, 2, "x"), Error);
  std::string m = message_of<Error>([&] { check_broadcast(out, in, 2, 0, 2, "bc"); });
  EXPECT_NE(m.find("root 2"), std::string::npos) << m;
  EXPECT_THROW(check_broadcast(out, in, -1, 0, 2, "x"), Error);
  EXPECT_THROW(check_broadcast(out, make({4}), 0, 0, 2, "x"), Error);
}

TEST_F(CollectiveChecksTest, AllToAllNeedsEqualCountsDivisibleBySize) {
  EXPECT_NO_THROW(check_all_to_all(make({12}), make({3, 4}), 3, "x"));
  EXPECT_THROW(check_all_to_all(make({12}), make({12}), 5, "x"), Error);
  EXPECT_THROW(check_all_to_all(make({12}), make({9}), 3, "x"), Error);
}

TEST_F(CollectiveChecksTest, AllToAllVCountsMatchTheTensors) {
  std::vector<int64_t> send = {1, 0, 3}, recv = {2, 2, 2};
  EXPECT_NO_THROW(check_all_to_all_v(make({6}), recv, make({4}), send, 3, "x"));
  std::string m =
      message_of<Error>([&] { check_all_to_all_v(make({6}), recv, make({5}), send, 3, "a2av"); });
  EXPECT_NE(m.find("sum(send_counts) = 4"), std::string::npos) << m;
  m = message_of<Error>([&] { check_all_to_all_v(make({6}), recv, make({4}), send, 2, "a2av"); });
  EXPECT_NE(m.find("one per rank"), std::string::npos) << m;
  std::vector<int64_t> negative = {-1, 3, 4};
  EXPECT_THROW(check_all_to_all_v(make({6}), negative, make({4}), send, 3, "x"), Error);
}

TEST_F(CollectiveChecksTest, PointToPointNeedsAPeerAndANonNegativeTag) {
  Tensor t = make({3});
  EXPECT_NO_THROW(check_point_to_point(t, 1, 0, 2, "x"));
  EXPECT_THROW(check_point_to_point(t, 2, 0, 2, "x"), Error);
  EXPECT_THROW(check_point_to_point(t, -1, 0, 2, "x"), Error);
  std::string m = message_of<Error>([&] { check_point_to_point(t, 1, -3, 2, "isend"); });
  EXPECT_NE(m.find("tag -3"), std::string::npos) << m;
  EXPECT_THROW(check_point_to_point(Tensor(), 1, 0, 2, "x"), Error);
}

}  // namespace
}  // namespace h2::comm
