// Shared pieces of the CUDA kernels (included by kernels/*.cu only): FP32 loads and stores of
// each storage type, FloatPtr/IndexPtr (tensors whose storage type is chosen at run time),
// deterministic warp and block reductions, launch sizing, scratch memory and the Launch scope
// (the stream's device made current). Reductions use xor butterflies, so every lane ends with the
// bit-identical value and results do not depend on scheduling.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_stream.h"
#include "core/op_args.h"

namespace h2::cuda {

__device__ __forceinline__ float load(const float* p) {
  return *p;
}
__device__ __forceinline__ float load(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ float load(const __half* p) {
  return __half2float(*p);
}
__device__ __forceinline__ void store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store(__half* p, float v) {
  *p = __float2half_rn(v);
}

enum class FloatKind : uint8_t { f32, bf16, f16 };

// A floating tensor of any storage type: for bandwidth-bound kernels, where the warp-uniform
// switch costs nothing and inputs of mixed dtypes (f32 grads into bf16, ...) just work.
struct FloatPtr {
  void* data = nullptr;
  FloatKind kind = FloatKind::f32;

  __device__ __forceinline__ float get(int64_t i) const {
    switch (kind) {
      case FloatKind::bf16:
        return load(static_cast<const __nv_bfloat16*>(data) + i);
      case FloatKind::f16:
        return load(static_cast<const __half*>(data) + i);
      default:
        return static_cast<const float*>(data)[i];
    }
  }
  __device__ __forceinline__ void set(int64_t i, float v) const {
    switch (kind) {
      case FloatKind::bf16:
        store(static_cast<__nv_bfloat16*>(data) + i, v);
        break;
      case FloatKind::f16:
        store(static_cast<__half*>(data) + i, v);
        break;
      default:
        static_cast<float*>(data)[i] = v;
    }
  }
};

// Host side: the FloatPtr of `t` (null when undefined); UnsupportedError for other dtypes.
inline FloatPtr float_ptr(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) return {};
  switch (t.dtype()) {
    case DType::f32:
      return {t.data(), FloatKind::f32};
    case DType::bf16:
      return {t.data(), FloatKind::bf16};
    case DType::f16:
      return {t.data(), FloatKind::f16};
    default:
      throw_unsupported(__FILE__, __LINE__,
                        str_cat("cuda ", op, ": '", name, "' is ", dtype_name(t.dtype()),
                                ", not f32, bf16 or f16"));
  }
}

// Integer ids (embedding, cross-entropy targets): i32 or i64.
struct IndexPtr {
  const void* data = nullptr;
  bool is64 = false;
  __device__ __forceinline__ int64_t get(int64_t i) const {
    return is64 ? static_cast<const int64_t*>(data)[i] : static_cast<const int32_t*>(data)[i];
  }
};

inline IndexPtr index_ptr(const Tensor& t, const char* op, const char* name) {
  if (t.dtype() != DType::i32 && t.dtype() != DType::i64)
    throw_check_failed(__FILE__, __LINE__, "i32 or i64",
                       str_cat("cuda ", op, ": '", name, "' is ", dtype_name(t.dtype())));
  return {t.data(), t.dtype() == DType::i64};
}

inline float* f32_ptr(const Tensor& t, const char* op, const char* name) {
  if (t.dtype() != DType::f32)
    throw_check_failed(__FILE__, __LINE__, "f32",
                       str_cat("cuda ", op, ": '", name, "' is ", dtype_name(t.dtype())));
  return static_cast<float*>(t.data());
}

// Calls fn(std::type_identity<T>{}) with T the device storage type of `dtype`.
template <class Fn>
void visit_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(std::type_identity<float>{});
      return;
    case DType::bf16:
      fn(std::type_identity<__nv_bfloat16>{});
      return;
    case DType::f16:
      fn(std::type_identity<__half>{});
      return;
    default:
      throw_unsupported(
          __FILE__, __LINE__,
          str_cat("cuda ", op, ": dtype ", dtype_name(dtype), " is not f32, bf16 or f16"));
  }
}

template <class V>
__device__ __forceinline__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block, returned to every thread. All threads call it; blockDim.x is a multiple
// of 32; `shared` holds 32 values and may be reused right after the call returns.
template <class V>
__device__ V block_sum(V v, V* shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // a previous call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? shared[lane] : V(0);
  return warp_sum(v);
}

// Grid-stride loops: for (int64_t i = first_index(); i < n; i += grid_stride()).
__device__ __forceinline__ int64_t first_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return int64_t(gridDim.x) * blockDim.x;
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (at least 1, at most enough to fill an H200).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  return unsigned(std::clamp<int64_t>((n + threads - 1) / threads, 1, 16384));
}

// Lets `kernel` use `bytes` of dynamic shared memory (needed above 48 KiB).
template <class Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    H2_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// One kernel entry's launch scope: the CUDA stream and its device made current.
class Launch {
 public:
  explicit Launch(Stream& stream)
      : stream_(as_cuda_stream(stream)), guard_(stream_.device_index()) {}
  cudaStream_t stream() const { return stream_.raw(); }
  CudaStream& cuda_stream() const { return stream_; }

 private:
  CudaStream& stream_;
  DeviceGuard guard_;
};

// Temporary device memory from the device's caching allocator, for `count` T; returned (in
// stream order, see cuda_allocator.h) when the buffer goes out of scope.
template <class T>
class Scratch {
 public:
  Scratch(Stream& stream, size_t count)
      : allocator_(stream.device().allocator()),
        bytes_(count * sizeof(T)),
        data_(static_cast<T*>(allocator_.allocate(bytes_))) {}
  ~Scratch() { allocator_.deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() const { return data_; }

 private:
  Allocator& allocator_;
  size_t bytes_;
  T* data_;
};

// H2_CUDA_REQUIRE for "same shape" with both shapes in the message.
inline void require_same_shape(const Tensor& a, const Tensor& b, const char* op, const char* a_name,
                               const char* b_name) {
  if (!(a.shape() == b.shape()))
    throw_check_failed(__FILE__, __LINE__, "same shape",
                       str_cat("cuda ", op, ": '", a_name, "' ", a.shape().str(), " vs '", b_name,
                               "' ", b.shape().str()));
}

}  // namespace h2::cuda
