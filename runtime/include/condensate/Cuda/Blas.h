//===- Blas.h - cuBLAS matrix products, loaded at run time ----------------===//
//
// A cuBLAS handle bound to a Stream, for the row-major products a decoder
// needs: activations [M, K] times weights stored [N, K] (out_features x
// in_features, as checkpoints store them), accumulated and written in f32.
// libcublas is opened with dlopen on first use (libcublas.so.13, then .so.12,
// then libcublas.so), so nothing here needs the CUDA toolkit to build.
//
// Row-major to column-major mapping. cuBLAS is column-major; a row-major
// matrix X[r, c] with row stride ld is, bytewise, the column-major matrix
// X^T [c, r] with leading dimension ld. We want C = A * B^T with
//   A row-major [M, K] (lda >= K)  = column-major A^T [K, M]
//   B row-major [N, K] (ldb >= K)  = column-major B^T [K, N]
//   C row-major [M, N] (ldc >= N)  = column-major C^T [N, M]
// and C^T = (A B^T)^T = B A^T, so we call column-major
//   gemm(transa = T, transb = N, m = N, n = M, k = K,
//        A := B (lda = ldb_rowmajor), B := A (ldb = lda_rowmajor),
//        C (ldc = ldc_rowmajor)),
// i.e. op(B^T) = B [N, K] and op(A^T) = A^T [K, M]; no data is transposed.
//
// Graph capture: gemm() makes no host synchronisation and no allocation (the
// handle owns a preallocated workspace, re-attached on every setStream), and
// scalars are passed by host pointer, which cuBLAS reads at enqueue time; so
// gemm() may be captured. Create the Blas and call setStream() outside
// capture.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CUDA_BLAS_H
#define CONDENSATE_CUDA_BLAS_H

#include "condensate/Cuda/Driver.h"

// The cuBLAS handle's own struct tag (cublasHandle_t is a cublasContext *).
struct cublasContext;

namespace condensate {
namespace cuda {

using BlasHandle = ::cublasContext *;

namespace detail {
void destroyBlas(BlasHandle raw) noexcept; // Blas.cpp
} // namespace detail

/// Element type of gemm inputs A and B (C is always f32).
enum class ElementType { F32, F16, BF16 };

const char *elementTypeName(ElementType type);
std::size_t elementSize(ElementType type);

/// Optional parts of a gemm. Leading dimensions are row strides in elements
/// of the row-major matrices; 0 means dense (K for A and B, N for C).
struct GemmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;
  /// For f32 inputs: allow TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
  /// Off by default, giving full f32 products.
  bool allowTf32 = false;
  int lda = 0;
  int ldb = 0;
  int ldc = 0;
};

/// A cuBLAS handle and its workspace, bound to one stream.
class Blas {
public:
  /// True if libcublas loads and has every entry point we need (says
  /// nothing about GPUs).
  static bool available();
  /// Why libcublas cannot be used, or success.
  static Status libraryStatus();

  /// Creates a handle in the current context, bound to `stream`, with
  /// TF32 off (CUBLAS_DEFAULT_MATH) and a private workspace.
  static Result<Blas> create(const Stream &stream);

  Blas() = default;
  Blas(Blas &&other) = default;
  /// Destroys the handle before the workspace it was given, as the
  /// destructor does (members go in reverse order).
  Blas &operator=(Blas &&other) noexcept {
    if (this != &other) {
      handle_.reset();
      workspace_ = std::move(other.workspace_);
      handle_ = std::move(other.handle_);
    }
    return *this;
  }

  /// Rebinds the handle to `stream` (not during capture).
  Status setStream(const Stream &stream);

  /// C[M, N] = alpha * A[M, K] * B[N, K]^T + beta * C, all row-major; A and
  /// B of `inputType`, C f32, f32 accumulation. M == 0 or N == 0 is a no-op.
  Status gemm(int m, int n, int k, ElementType inputType, DevicePtr a,
              DevicePtr b, DevicePtr c, const GemmOptions &options = {});

  /// `batch` independent gemms; matrix i starts at a + i * strideA elements
  /// (likewise b and c). A stride of 0 reuses one matrix for every batch.
  Status gemmStridedBatched(int batch, int m, int n, int k,
                            ElementType inputType, DevicePtr a,
                            long long strideA, DevicePtr b, long long strideB,
                            DevicePtr c, long long strideC,
                            const GemmOptions &options = {});

  /// cublasGetVersion, e.g. 130100.
  Result<int> version() const;
  std::size_t workspaceBytes() const { return workspace_.size(); }
  bool valid() const { return !handle_.empty(); }
  BlasHandle raw() const { return handle_.get(); }

private:
  // Declared before handle_: the handle is destroyed first.
  DeviceBuffer workspace_;
  Handle<BlasHandle, detail::destroyBlas> handle_;
};

} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_CUDA_BLAS_H
