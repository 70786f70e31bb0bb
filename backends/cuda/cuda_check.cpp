// Error messages of the checked-call macros (see cuda_check.h), formatted with fmt here because
// the .cu files that raise them cannot include fmt.
#include "backends/cuda/cuda_check.h"

#include "core/error.h"

namespace h2::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string message = fmt::format("CUDA call {} failed: {} ({})", call, cudaGetErrorName(status),
                                    cudaGetErrorString(status));
  if (status == cudaErrorMemoryAllocation) throw OutOfMemoryError(message, SourceLine{file, line});
  throw Error(message, SourceLine{file, line});
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  std::string message = fmt::format("cuBLAS call {} failed: {} ({})", call,
                                    cublasGetStatusName(status), cublasGetStatusString(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(message, SourceLine{file, line});
  throw Error(message, SourceLine{file, line});
}

void throw_check_failed(const char* file, int line, const char* cond, const std::string& message) {
  throw Error(fmt::format("check failed: {}: {}", cond, message), SourceLine{file, line});
}

void throw_unsupported(const char* file, int line, const std::string& message) {
  throw UnsupportedError(message, SourceLine{file, line});
}

}  // namespace h2::cuda
