// Row-major SGEMM through OpenBLAS (the OpenMP build): C = alpha * op(A) @ op(B) + beta * C with
// explicit leading dimensions, so callers can multiply blocks that sit inside larger tensors.
// Called inside an OpenMP parallel region it runs on the calling thread only; outside, it uses
// every OpenMP thread. blasint is 32-bit: callers keep every extent and leading dimension below
// 2^31 (matmul checks its shapes; attention blocks are small by construction).
#pragma once

#include <cblas.h>

#include <cstdint>

namespace h2::cpu {

// A: (m, k), or (k, m) stored when trans_a; B: (k, n), or (n, k) when trans_b; C: (m, n).
// m, n, k > 0 (BLAS rejects k == 0 with ld 0). Leading dimensions are row strides in elements,
// at least the stored row length.
inline void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, blasint(m), blasint(n), blasint(k), alpha, a,
              blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
}

}  // namespace h2::cpu
