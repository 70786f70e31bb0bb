// CUDA device properties, copies and the backend's device list (see cuda_backend.h).
#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "backends/cuda/cuda_allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_stream.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::cuda {
namespace {

// Dense (no sparsity) peaks of each architecture's data-centre part, from NVIDIA's datasheets.
// 16-bit, FP8 and FP4 figures are tensor-core GEMM rates (0: no native support, qmatmul then
// emulates the format); f32 is the CUDA-core rate, which is what matmul runs at
// (CUBLAS_COMPUTE_32F without TF32). Other parts of an architecture scale by SM count
// (approximate: clocks differ, e.g. H100 PCIe). `bandwidth` is used only when the driver does
// not report the memory clock and bus width.
struct ArchPeak {
  int major, minor;
  int sms;  // of the part the figures are for
  double bf16, f16, f32, fp8, fp4, bandwidth;
};

const ArchPeak* find_arch_peak(int major, int minor) {
  static const ArchPeak kTable[] = {
      {8, 0, 108, 312e12, 312e12, 19.5e12, 0, 0, 2.039e12},             // A100 SXM4 80GB
      {8, 6, 72, 125e12, 125e12, 31.2e12, 0, 0, 0.600e12},              // A10
      {8, 9, 142, 362e12, 362e12, 91.6e12, 733e12, 0, 0.864e12},        // L40S
      {9, 0, 132, 989e12, 989e12, 66.9e12, 1979e12, 0, 3.35e12},        // H100 SXM5 / H200 SXM
      {10, 0, 148, 2250e12, 2250e12, 75e12, 4500e12, 9000e12, 8.0e12},  // B200 (HGX sheet / 8)
  };
  for (const ArchPeak& entry : kTable)
    if (entry.major == major && entry.minor == minor) return &entry;
  return nullptr;
}

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return value;
}

DeviceProps read_props(int index) {
  cudaDeviceProp prop{};
  H2_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceProps props;
  props.name = prop.name;
  props.memory_bytes = int64_t(prop.totalGlobalMem);
  // f8e4m3, f8e5m2, f4e2m1: the codes of quantize and qmatmul.
  props.dtypes = {DType::f32,    DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2,
                  DType::f4e2m1, DType::i32,  DType::i64, DType::u8};

  // CUDA 13 dropped cudaDeviceProp::memoryClockRate; the attribute remains (kHz, double data rate).
  double memory_clock_hz = double(device_attribute(cudaDevAttrMemoryClockRate, index)) * 1e3;
  double bus_bytes = double(device_attribute(cudaDevAttrGlobalMemoryBusWidth, index)) / 8;
  props.memory_bandwidth = 2 * memory_clock_hz * bus_bytes;

  const ArchPeak* peak = find_arch_peak(prop.major, prop.minor);
  if (peak != nullptr) {
    double scale = double(prop.multiProcessorCount) / peak->sms;
    props.peak_flops = {{DType::bf16, peak->bf16 * scale},
                        {DType::f16, peak->f16 * scale},
                        {DType::f32, peak->f32 * scale}};
    if (peak->fp8 > 0) {  // Hopper and Ada: E4M3 and E5M2 tensor cores
      props.peak_flops[DType::f8e4m3] = peak->fp8 * scale;
      props.peak_flops[DType::f8e5m2] = peak->fp8 * scale;
    }
    if (peak->fp4 > 0) props.peak_flops[DType::f4e2m1] = peak->fp4 * scale;  // Blackwell
    if (props.memory_bandwidth <= 0) {
      bool h200 = prop.major == 9 && prop.totalGlobalMem > (size_t(100) << 30);  // 141 GB HBM3e
      props.memory_bandwidth = h200 ? 4.8e12 : peak->bandwidth;
    }
  } else {
    // Unknown architecture: 128 FP32 lanes per SM doing one FMA per clock.
    double clock_hz = double(device_attribute(cudaDevAttrClockRate, index)) * 1e3;
    props.peak_flops = {{DType::f32, double(prop.multiProcessorCount) * clock_hz * 256}};
    H2_LOG_DEBUG("cuda:{}: no peak table entry for sm_{}{}; f32 peak estimated from clocks", index,
                 prop.major, prop.minor);
  }
  return props;
}

int probe_device_count() noexcept {
  try {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();
      H2_LOG_DEBUG("cuda: no devices ({}: {})", cudaGetErrorName(status),
                   cudaGetErrorString(status));
      return 0;
    }
    return count;
  } catch (...) {
    return 0;
  }
}

}  // namespace

CudaDevice::CudaDevice(int index) : index_(index), props_(read_props(index)) {
  DeviceGuard guard(index_);
  streams_ = std::make_unique<StreamRegistry>();
  allocator_ = std::make_unique<CudaCachingAllocator>(
      fmt::format("cuda:{} ({})", index_, props_.name), index_, *streams_);
  default_stream_ = std::make_unique<CudaStream>(*this, index_, *streams_);
}

CudaDevice::~CudaDevice() {
  default_stream_.reset();
  allocator_.reset();
  streams_.reset();
}

Allocator& CudaDevice::allocator() {
  return *allocator_;
}

Stream& CudaDevice::default_stream() {
  return *default_stream_;
}

std::unique_ptr<Stream> CudaDevice::create_stream() {
  return std::make_unique<CudaStream>(*this, index_, *streams_);
}

std::unique_ptr<Event> CudaDevice::create_event() {
  return std::make_unique<CudaEvent>(index_);
}

void CudaDevice::copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device,
                            size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  CudaStream& cuda_stream = as_cuda_stream(stream);
  H2_CHECK(cuda_stream.device_index() == index_, "copy on {} with a stream of cuda:{}", str(),
           cuda_stream.device_index());
  DeviceGuard guard(index_);
  if (!dst_on_device && !src_on_device) {
    cuda_stream.synchronize();  // host to host: keep the stream's order all the same
    std::memmove(dst, src, bytes);
    return;
  }
  cudaMemcpyKind kind = !dst_on_device  ? cudaMemcpyDeviceToHost
                        : src_on_device ? cudaMemcpyDeviceToDevice
                                        : cudaMemcpyHostToDevice;
  H2_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, cuda_stream.raw()));
  // The contract: the host side may be reused on return. (Pageable memory alone would not
  // guarantee it for device-to-host, and pinned memory would not for either direction.)
  if (kind != cudaMemcpyDeviceToDevice) H2_CUDA_CHECK(cudaStreamSynchronize(cuda_stream.raw()));
}

CudaBackend::CudaBackend() : count_(probe_device_count()) {
  devices_.resize(size_t(count_));
}

CudaBackend::~CudaBackend() = default;

Device& CudaBackend::device(int index) {
  H2_CHECK(index >= 0 && index < count_, "cuda:{} does not exist ({} CUDA devices)", index, count_);
  std::lock_guard lock(mutex_);
  auto& slot = devices_[size_t(index)];
  if (slot == nullptr) slot = std::make_unique<CudaDevice>(index);
  return *slot;
}

}  // namespace h2::cuda
