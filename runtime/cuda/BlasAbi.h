//===- BlasAbi.h - The subset of cublas_api.h that the runtime calls ------===//
//
// Private to runtime/cuda/ (not installed). Like DriverAbi.h, for cuBLAS
// (loaded with dlopen at run time): the enum values and entry-point
// signatures we use, copied from cublas_api.h and library_types.h of CUDA
// 12/13 (cuBLAS 13.1 was checked) and static_asserted against them by
// test/unit/cuda/CudaAbiCheck.cpp when the headers exist.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_CUDA_BLASABI_H
#define CONDENSATE_RUNTIME_CUDA_BLASABI_H

#include "DriverAbi.h"

#include "condensate/Cuda/Blas.h"

namespace condensate {
namespace cuda {
namespace abi {

/// Blas.h declares the handle under cuBLAS's own struct tag.
using cublasHandle_t = BlasHandle;
/// cudaStream_t is the same type as CUstream.
using cudaStream_t = StreamHandle;

/// cublasStatus_t, as X(name, value) (see DriverAbi.h).
#define CONDENSATE_CUBLAS_STATUSES(X)                                          \
  X(CUBLAS_STATUS_SUCCESS, 0)                                                  \
  X(CUBLAS_STATUS_NOT_INITIALIZED, 1)                                          \
  X(CUBLAS_STATUS_ALLOC_FAILED, 3)                                             \
  X(CUBLAS_STATUS_INVALID_VALUE, 7)                                            \
  X(CUBLAS_STATUS_ARCH_MISMATCH, 8)                                            \
  X(CUBLAS_STATUS_MAPPING_ERROR, 11)                                           \
  X(CUBLAS_STATUS_EXECUTION_FAILED, 13)                                        \
  X(CUBLAS_STATUS_INTERNAL_ERROR, 14)                                          \
  X(CUBLAS_STATUS_NOT_SUPPORTED, 15)                                           \
  X(CUBLAS_STATUS_LICENSE_ERROR, 16)

enum cublasStatus_t : int {
  CONDENSATE_CUBLAS_STATUSES(CONDENSATE_CUDA_ENUMERATOR)
};

enum cublasOperation_t : int {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
};

enum cublasMath_t : int {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
};

/// cudaDataType (library_types.h), real types only.
enum cudaDataType : int {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
};

enum cublasComputeType_t : int {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

enum cublasGemmAlgo_t : int {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
};

// X(symbol, return type, (parameters), required); see DriverAbi.h.
#define CONDENSATE_CUBLAS_ENTRY_POINTS(X)                                      \
  X(cublasCreate_v2, cublasStatus_t, (cublasHandle_t * handle), true)          \
  X(cublasDestroy_v2, cublasStatus_t, (cublasHandle_t handle), true)           \
  X(cublasGetVersion_v2, cublasStatus_t,                                       \
    (cublasHandle_t handle, int *version), true)                               \
  X(cublasSetStream_v2, cublasStatus_t,                                        \
    (cublasHandle_t handle, cudaStream_t streamId), true)                      \
  X(cublasSetWorkspace_v2, cublasStatus_t,                                     \
    (cublasHandle_t handle, void *workspace,                                   \
     std::size_t workspaceSizeInBytes),                                        \
    true)                                                                      \
  X(cublasSetMathMode, cublasStatus_t,                                         \
    (cublasHandle_t handle, cublasMath_t mode), true)                          \
  X(cublasSgemm_v2, cublasStatus_t,                                            \
    (cublasHandle_t handle, cublasOperation_t transa,                          \
     cublasOperation_t transb, int m, int n, int k, const float *alpha,        \
     const float *A, int lda, const float *B, int ldb, const float *beta,      \
     float *C, int ldc),                                                       \
    true)                                                                      \
  X(cublasGemmEx, cublasStatus_t,                                              \
    (cublasHandle_t handle, cublasOperation_t transa,                          \
     cublasOperation_t transb, int m, int n, int k, const void *alpha,         \
     const void *A, cudaDataType Atype, int lda, const void *B,                \
     cudaDataType Btype, int ldb, const void *beta, void *C,                   \
     cudaDataType Ctype, int ldc, cublasComputeType_t computeType,             \
     cublasGemmAlgo_t algo),                                                   \
    true)                                                                      \
  X(cublasGemmStridedBatchedEx, cublasStatus_t,                                \
    (cublasHandle_t handle, cublasOperation_t transa,                          \
     cublasOperation_t transb, int m, int n, int k, const void *alpha,         \
     const void *A, cudaDataType Atype, int lda, long long int strideA,        \
     const void *B, cudaDataType Btype, int ldb, long long int strideB,        \
     const void *beta, void *C, cudaDataType Ctype, int ldc,                   \
     long long int strideC, int batchCount, cublasComputeType_t computeType,   \
     cublasGemmAlgo_t algo),                                                   \
    true)                                                                      \
  /* cuBLAS 11.4+; a built-in table is used when missing. */                   \
  X(cublasGetStatusName, const char *, (cublasStatus_t status), false)         \
  X(cublasGetStatusString, const char *, (cublasStatus_t status), false)

#define CONDENSATE_CUBLAS_DECLARE_PFN(name, ret, params, required)             \
  using PFN_##name = ret(*) params;
CONDENSATE_CUBLAS_ENTRY_POINTS(CONDENSATE_CUBLAS_DECLARE_PFN)
#undef CONDENSATE_CUBLAS_DECLARE_PFN

/// The resolved cuBLAS entry points.
struct BlasApi {
#define CONDENSATE_CUBLAS_DECLARE_MEMBER(name, ret, params, required)          \
  PFN_##name name = nullptr;
  CONDENSATE_CUBLAS_ENTRY_POINTS(CONDENSATE_CUBLAS_DECLARE_MEMBER)
#undef CONDENSATE_CUBLAS_DECLARE_MEMBER
};

} // namespace abi
} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_RUNTIME_CUDA_BLASABI_H
