// The CUDA backend on a real GPU (CTest label `cuda`: scripts/test.sh runs it only where
// nvidia-smi lists a GPU). Checks device properties, the out-of-memory error, streams and
// events, and copies between host, GPU and a virtual chip. Kernels are covered by the op
// conformance suite, which runs on every registered device, cuda:N included.
#include <gtest/gtest.h>

#include <numeric>

#include "backends/registry.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2 {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Backend* cuda = runtime->backend("cuda");
    if (cuda == nullptr || cuda->device_count() == 0)
      GTEST_SKIP() << "no CUDA backend or no GPU in this build/machine";
    gpu = &cuda->device(0);
  }
  std::unique_ptr<Runtime> runtime = create_runtime();
  Device* gpu = nullptr;
};

TEST_F(CudaDeviceTest, PropertiesDescribeTheGpu) {
  const DeviceProps& p = gpu->props();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.memory_bytes, int64_t(1) << 30);
  EXPECT_GT(p.memory_bandwidth, 1e11);
  EXPECT_GT(p.peak(DType::bf16), p.peak(DType::f32));
  EXPECT_EQ(gpu->memory_kind(), MemoryKind::device);
  EXPECT_TRUE(gpu->supports(Op::matmul, DType::bf16));
}

TEST_F(CudaDeviceTest, OutOfMemoryNamesTheDeviceAndLeavesItUsable) {
  try {
    Tensor huge = Tensor::empty({int64_t(1) << 42}, DType::f32, *gpu);  // 16 TiB
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  std::vector<float> v = {1, 2, 3};
  EXPECT_EQ(tensor_to_floats(tensor_from_floats(v, {3}, DType::f32, *gpu)), v);
}

TEST_F(CudaDeviceTest, CopiesBetweenHostGpuAndVirtualChip) {
  std::vector<float> values(1 << 20);
  std::iota(values.begin(), values.end(), 0.0f);
  Tensor host = tensor_from_floats(values, {1 << 20}, DType::f32, runtime->cpu());
  Tensor on_gpu = host.to(*gpu);
  Tensor on_chip = on_gpu.to(runtime->device("vchip:0"));  // staged through host memory
  EXPECT_EQ(tensor_to_floats(on_chip), values);
  EXPECT_EQ(tensor_to_floats(on_chip.to(*gpu)), values);
}

TEST_F(CudaDeviceTest, EventsTimeWorkOnASideStream) {
  auto stream = gpu->create_stream();
  auto start = gpu->create_event(), stop = gpu->create_event();
  Tensor a = Tensor::zeros({1024, 1024}, DType::f32, *gpu);
  Tensor out = Tensor::empty({1024, 1024}, DType::f32, *gpu);
  gpu->default_stream().synchronize();  // zeros() ran there; the side stream reads `a`
  start->record(*stream);
  for (int i = 0; i < 10; ++i) ops::matmul({.out = out, .a = a, .b = a}, stream.get());
  stop->record(*stream);
  stop->synchronize();
  EXPECT_GT(stop->elapsed_ms_since(*start), 0.0);
  stream->synchronize();
  EXPECT_EQ(tensor_to_floats(out)[0], 0.0f);
}

}  // namespace
}  // namespace h2
