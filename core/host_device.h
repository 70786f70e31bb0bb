// H2_HOST_DEVICE marks the small inline functions that host code and CUDA kernels share (format
// codecs, rotary frequencies): __host__ __device__ under nvcc, nothing elsewhere.
#pragma once

#if defined(__CUDACC__)
#define H2_HOST_DEVICE __host__ __device__
#else
#define H2_HOST_DEVICE
#endif
