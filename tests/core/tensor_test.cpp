// Tensor views and copies: slicing, transposes and permutations address the right elements,
// contiguous() materialises them, and values survive round trips through every device.
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "backends/registry.h"
#include "core/error.h"
#include "core/tensor_host.h"

namespace h2 {
namespace {

class TensorTest : public ::testing::Test {
 protected:
  std::unique_ptr<Runtime> runtime = create_runtime();
  Device& cpu = runtime->cpu();

  Tensor iota(const Shape& shape, DType dtype = DType::f32) {
    std::vector<float> v(size_t(shape.numel()));
    std::iota(v.begin(), v.end(), 0.0f);
    return tensor_from_floats(v, shape, dtype, cpu);
  }
};

TEST_F(TensorTest, ContiguousStridesAndNumel) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::f32, cpu);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 96);
  EXPECT_EQ(Tensor::empty({0, 5}, DType::bf16, cpu).numel(), 0);
  EXPECT_EQ(Tensor::empty({3}, DType::f4e2m1, cpu).nbytes(), 2);  // two per byte, rounded up
}

TEST_F(TensorTest, SliceSelectTransposePermute) {
  Tensor t = iota({2, 3, 4});
  // element (i, j, k) holds 12i + 4j + k
  auto s = tensor_to_floats(t.slice(2, 1, 3));  // (2, 3, 2)
  EXPECT_EQ(s.size(), 12u);
  EXPECT_EQ(s[0], 1);
  EXPECT_EQ(s[1], 2);
  EXPECT_EQ(s[2], 5);
  EXPECT_EQ(s[11], 22);
  auto sel = tensor_to_floats(t.select(1, 2));  // (2, 4): 8 + 12i + k
  EXPECT_EQ(sel[0], 8);
  EXPECT_EQ(sel[5], 21);
  Tensor tr = t.transpose(0, 2);  // (4, 3, 2)
  EXPECT_FALSE(tr.is_contiguous());
  auto trv = tensor_to_floats(tr);
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) EXPECT_EQ(trv[size_t(k * 6 + j * 2 + i)], 12 * i + 4 * j + k);
  auto pv = tensor_to_floats(t.permute({1, 2, 0}));  // (3, 4, 2)
  EXPECT_EQ(pv[size_t(1 * 8 + 3 * 2 + 1)], 12 + 4 + 3);
}

TEST_F(TensorTest, ViewInfersOneExtentAndRejectsMismatch) {
  Tensor t = iota({4, 6});
  EXPECT_EQ(t.view({2, -1, 3}).shape(), (Shape{2, 4, 3}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(t.transpose(0, 1).view({24}), Error);
}

TEST_F(TensorTest, RoundTripThroughEveryDeviceAndDtype) {
  for (Device* device : runtime->devices()) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      Tensor src = iota({3, 5}, dtype);
      Tensor there = src.to(*device);
      EXPECT_EQ(&there.device(), device);
      EXPECT_EQ(tensor_to_floats(there), tensor_to_floats(src)) << device->str();
    }
  }
}

TEST_F(TensorTest, AliasDetection) {
  Tensor t = iota({4, 4});
  EXPECT_TRUE(t.slice(0, 0, 2).may_alias(t.slice(0, 1, 3)));
  EXPECT_FALSE(t.slice(0, 0, 2).may_alias(t.slice(0, 2, 4)));
  EXPECT_FALSE(t.may_alias(iota({4, 4})));
}

TEST_F(TensorTest, IntegerRoundTrip) {
  std::vector<int64_t> ids = {0, 7, -3, 1 << 20};
  for (DType dtype : {DType::i32, DType::i64})
    EXPECT_EQ(tensor_to_ints(tensor_from_ints(ids, {4}, dtype, cpu)), ids);
}

TEST_F(TensorTest, ZeroSizeTensorsAreContiguous) {
  Tensor t = Tensor::empty({2, 0, 3}, DType::f32, cpu);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.view({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_TRUE(iota({4, 4}).slice(1, 2, 2).is_contiguous());
}

TEST_F(TensorTest, SizesThatOverflowAreRejected) {
  EXPECT_THROW(Tensor::empty({int64_t(1) << 58, 64}, DType::f32, cpu), Error);
  EXPECT_THROW((Shape{int64_t(1) << 32, int64_t(1) << 32}.numel()), Error);
  EXPECT_THROW(Tensor::empty({int64_t(1) << 59}, DType::f32, cpu), Error);
}

// Guards dtype_storage_bytes: n * bits overflowed int64 for counts whose byte size fits (2^60
// f32 elements are 2^62 bytes; fuzz finding safetensors-storage-bytes-overflow). f4 still rounds
// up to whole bytes.
TEST_F(TensorTest, StorageBytesOfLargeCountsDoNotOverflow) {
  EXPECT_EQ(dtype_storage_bytes(DType::f32, int64_t(1) << 60), int64_t(1) << 62);
  EXPECT_EQ(dtype_storage_bytes(DType::i64, (int64_t(1) << 59) + 3), (int64_t(1) << 62) + 24);
  EXPECT_EQ(dtype_storage_bytes(DType::f4e2m1, std::numeric_limits<int64_t>::max()), int64_t(1)
                                                                                         << 62);
  EXPECT_EQ(dtype_storage_bytes(DType::f4e2m1, 3), 2);
  EXPECT_EQ(dtype_storage_bytes(DType::bf16, 0), 0);
}

TEST_F(TensorTest, OddF4CopyAcrossDevicesIsRejected) {
  Device& chip = runtime->device("vchip:0");
  Tensor dst = Tensor::zeros({4}, DType::u8, cpu);
  Tensor f4 = Tensor::from_blob(dst.data(), {8}, DType::f4e2m1, cpu);
  Tensor src = Tensor::empty({3}, DType::f4e2m1, chip);
  EXPECT_THROW(f4.slice(0, 0, 3).copy_from(src), Error);
  EXPECT_THROW(f4.slice(0, 1, 3).data(), Error);  // odd offset: not byte-addressable
}

TEST_F(TensorTest, OverlappingCopyIsRejected) {
  Tensor t = iota({8});
  try {
    t.slice(0, 1, 8).copy_from(t.slice(0, 0, 7));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  t.copy_from(t);  // the same view is a no-op
  EXPECT_EQ(tensor_to_floats(t)[7], 7.0f);
}

TEST_F(TensorTest, UndefinedTensorIsAnErrorNotACrash) {
  Tensor undefined;
  EXPECT_THROW(undefined.device(), Error);
  EXPECT_THROW(iota({2}).copy_from(undefined), Error);
}

TEST_F(TensorTest, HugeDeviceIndexIsAConfigError) {
  EXPECT_THROW(runtime->device("cpu:99999999999"), ConfigError);
  EXPECT_THROW(runtime->device("vchip:-1"), ConfigError);
}

}  // namespace
}  // namespace h2
