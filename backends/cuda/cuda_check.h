// Checked CUDA runtime and cuBLAS calls: H2_CUDA_CHECK(expr), H2_CUBLAS_CHECK(expr) and
// H2_CUDA_LAUNCH_CHECK() throw h2::Error (OutOfMemoryError for allocation failures) carrying
// file:line, the call's text and the library's own name and description of the status.
// Deliberately free of fmt: kernels/*.cu include this header and nvcc cannot compile fmt 9's
// consteval format strings, so messages are built in cuda_check.cpp (compiled by the host
// compiler). H2_CUDA_REQUIRE(cond, message) is the fmt-free H2_CHECK for .cu files.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

namespace h2::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
// h2::Error "file:line: check failed: cond: message".
[[noreturn]] void throw_check_failed(const char* file, int line, const char* cond,
                                     const std::string& message);
// h2::UnsupportedError "file:line: message".
[[noreturn]] void throw_unsupported(const char* file, int line, const std::string& message);

// Concatenates anything with an operator<< (the fmt-free way to build messages in .cu files).
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace h2::cuda

#define H2_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    cudaError_t h2_cuda_status_ = (expr);                                       \
    if (h2_cuda_status_ != cudaSuccess)                                         \
      ::h2::cuda::throw_cuda_error(h2_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define H2_CUBLAS_CHECK(expr)                                                       \
  do {                                                                              \
    cublasStatus_t h2_cublas_status_ = (expr);                                      \
    if (h2_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::h2::cuda::throw_cublas_error(h2_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: reports bad launch configurations (and earlier sticky faults).
#define H2_CUDA_LAUNCH_CHECK() H2_CUDA_CHECK(cudaGetLastError())

#define H2_CUDA_REQUIRE(cond, message)                                                 \
  do {                                                                                 \
    if (!(cond)) ::h2::cuda::throw_check_failed(__FILE__, __LINE__, #cond, (message)); \
  } while (0)
