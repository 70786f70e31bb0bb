// The loopback transport and the communicator of one rank built on it (single-process jobs):
// every collective of one rank is the identity (the n = 1 case of the closed forms the
// multi-process suite uses), self-transfers match by tag in posting order whichever side is
// posted first, and misuse (another peer, a receive too small) is a CommError naming it.
#include "comm/transports/loopback/loopback_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/registry.h"
#include "comm/comm_error.h"
#include "comm/world/world.h"
#include "core/tensor_host.h"

namespace h2::comm {
namespace {

class Loopback : public ::testing::Test {
 protected:
  Tensor iota(int64_t n, float offset = 0) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = offset + float(i);
    return tensor_from_floats(v, {n}, DType::f32, runtime->cpu());
  }
  std::unique_ptr<Runtime> runtime = create_runtime();
  std::unique_ptr<Communicator> comm = loopback_communicator();
};

TEST_F(Loopback, EveryCollectiveOfOneRankIsTheIdentity) {
  ASSERT_EQ(comm->rank(), 0);
  ASSERT_EQ(comm->size(), 1);
  const std::vector<float> want = tensor_to_floats(iota(4099));
  for (auto op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::avg}) {
    Tensor in = iota(4099), out = iota(4099, 100);
    comm->all_reduce(out, in, op);
    EXPECT_EQ(tensor_to_floats(out), want) << reduce_op_name(op);
    comm->all_reduce(in, op);  // in place
    EXPECT_EQ(tensor_to_floats(in), want) << reduce_op_name(op);
  }
  Tensor out = iota(4099, 7);
  comm->all_gather(out, iota(4099));
  EXPECT_EQ(tensor_to_floats(out), want);
  out = iota(4099, 7);
  comm->reduce_scatter(out, iota(4099), ReduceOp::sum);
  EXPECT_EQ(tensor_to_floats(out), want);
  out = iota(4099, 7);
  comm->broadcast(out, iota(4099), 0);
  EXPECT_EQ(tensor_to_floats(out), want);
  out = iota(4099, 7);
  comm->all_to_all(out, iota(4099));
  EXPECT_EQ(tensor_to_floats(out), want);
  comm->barrier();
}

TEST_F(Loopback, SelfTransfersMatchByTagInPostingOrder) {
  // Receive first (tag 2), then two sends on tag 1 and one on tag 2: the tag-2 receive takes the
  // tag-2 send; the later tag-1 receives take the tag-1 sends in order.
  Tensor r2 = iota(3, -1), r1a = iota(3, -1), r1b = iota(3, -1);
  auto recv2 = comm->irecv(r2, 0, 2);
  auto s1a = comm->isend(iota(3, 10), 0, 1);
  auto s1b = comm->isend(iota(3, 20), 0, 1);
  auto s2 = comm->isend(iota(3, 30), 0, 2);
  recv2->wait();
  comm->recv(r1a, 0, 1);
  comm->recv(r1b, 0, 1);
  for (auto* s : {s1a.get(), s1b.get(), s2.get()}) s->wait();
  EXPECT_EQ(tensor_to_floats(r2), tensor_to_floats(iota(3, 30)));
  EXPECT_EQ(tensor_to_floats(r1a), tensor_to_floats(iota(3, 10)));
  EXPECT_EQ(tensor_to_floats(r1b), tensor_to_floats(iota(3, 20)));
}

TEST_F(Loopback, SplitGivesOneRankOrNone) {
  auto child = comm->split(0, 0);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->size(), 1);
  Tensor t = iota(5);
  child->all_reduce(t, ReduceOp::sum);
  EXPECT_EQ(tensor_to_floats(t), tensor_to_floats(iota(5)));
  EXPECT_EQ(comm->split(-1, 0), nullptr);
}

TEST(LoopbackTransport, RefusesOtherPeersAndTooSmallReceives) {
  LoopbackTransport t;
  const char bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_THROW(t.post_send(1, 0, bytes, 8), CommError);
  char small[4];
  t.post_send(0, 5, bytes, 8);
  try {
    t.post_recv(0, 5, ~uint64_t(0), small, 4);
    FAIL() << "a receive of 4 bytes took a message of 8";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("8 bytes"), std::string::npos) << e.what();
  }
  char big[8] = {};
  const OpId recv = t.post_recv(0, 6, ~uint64_t(0), big, 8);
  EXPECT_FALSE(t.test(recv).has_value());  // nothing sent on tag 6 yet
  const OpId send = t.post_send(0, 6, bytes, 8);
  ASSERT_TRUE(t.test(send).has_value());
  const auto done = t.test(recv);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->bytes, 8u);
  EXPECT_EQ(done->sender_tag, 6u);
  EXPECT_EQ(std::memcmp(big, bytes, 8), 0);
}

}  // namespace
}  // namespace h2::comm
