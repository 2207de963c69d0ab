//===- Blas.cpp - cuBLAS matrix products, loaded at run time --------------===//
//
// Implements Blas.h: opens libcublas with dlopen, resolves the entry points in
// BlasAbi.h (the one cuBLAS table) and maps row-major gemms onto
// column-major cuBLAS calls.
//
//===----------------------------------------------------------------------===//
#include "condensate/Cuda/Blas.h"

#include "BlasAbi.h"

#include <dlfcn.h>

#include <memory>

namespace condensate {
namespace cuda {

using namespace abi;

namespace {

/// The loaded cuBLAS library.
struct BlasLibrary {
  void *handle = nullptr;
  std::string soname;
  BlasApi api;
};

Result<const BlasLibrary *> loadBlasLibrary() {
  std::unique_ptr<BlasLibrary> library(new BlasLibrary());
  std::string tried;
  for (const char *soname :
       {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    library->handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library->handle) {
      library->soname = soname;
      break;
    }
    const char *why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") +
             (why ? why : std::string(soname) + ": unknown error");
  }
  if (!library->handle)
    return Status::error("no cuBLAS: dlopen of libcublas.so.13, "
                         "libcublas.so.12 and libcublas.so failed: " +
                         tried);

  std::string missing;
  auto resolve = [&](const char *name, bool required) -> void * {
    void *symbol = dlsym(library->handle, name);
    if (!symbol && required)
      missing += missing.empty() ? name : std::string(", ") + name;
    return symbol;
  };
  BlasApi &api = library->api;
#define CONDENSATE_CUBLAS_RESOLVE(name, ret, params, required)                 \
  api.name = reinterpret_cast<PFN_##name>(resolve(#name, required));
  CONDENSATE_CUBLAS_ENTRY_POINTS(CONDENSATE_CUBLAS_RESOLVE)
#undef CONDENSATE_CUBLAS_RESOLVE
  if (!missing.empty())
    return Status::error(library->soname + " lacks cuBLAS entry points: " +
                         missing);
  return static_cast<const BlasLibrary *>(library.release());
}

/// The process-wide cuBLAS library cache, like Driver::get(): loaded once,
/// read-only afterwards, never unloaded.
Result<const BlasLibrary *> blasLibrary() {
  static const Result<const BlasLibrary *> *const outcome =
      new Result<const BlasLibrary *>(loadBlasLibrary());
  return *outcome;
}

const char *statusName(const BlasApi &api, cublasStatus_t status) {
  if (api.cublasGetStatusName)
    if (const char *name = api.cublasGetStatusName(status))
      return name;
  switch (status) { CONDENSATE_CUBLAS_STATUSES(CONDENSATE_CUDA_NAME_CASE) }
  return "unknown cublasStatus_t";
}

/// "<call> failed: NAME (text)[; detail]", like Driver::check.
Status checkBlas(const BlasApi &api, cublasStatus_t status, const char *call,
                 const std::string &detail = std::string()) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  const char *text =
      api.cublasGetStatusString ? api.cublasGetStatusString(status) : nullptr;
  std::string message =
      std::string(call) + " failed: " + statusName(api, status) + " (" +
      (text ? std::string(text)
            : "status " + std::to_string(static_cast<int>(status))) +
      ")";
  if (!detail.empty())
    message += "; " + detail;
  return Status::error(std::move(message));
}

cudaDataType dataType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return CUDA_R_32F;
  case ElementType::F16:
    return CUDA_R_16F;
  case ElementType::BF16:
    return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

/// Resolved leading dimensions and compute type of a row-major gemm.
struct GemmPlan {
  int m, n, k;
  ElementType type;
  int lda, ldb, ldc;
  cublasComputeType_t compute;

  /// For error messages only (allocates).
  std::string describe() const {
    return std::string("M=") + std::to_string(m) + " N=" + std::to_string(n) +
           " K=" + std::to_string(k) + " inputs " + elementTypeName(type) +
           " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
           " ldc=" + std::to_string(ldc);
  }
};

Result<GemmPlan> planGemm(int m, int n, int k, ElementType type, DevicePtr a,
                          DevicePtr b, DevicePtr c,
                          const GemmOptions &options) {
  GemmPlan plan{};
  plan.m = m;
  plan.n = n;
  plan.k = k;
  plan.type = type;
  plan.lda = options.lda ? options.lda : k;
  plan.ldb = options.ldb ? options.ldb : k;
  plan.ldc = options.ldc ? options.ldc : n;
  plan.compute = (type == ElementType::F32 && options.allowTf32)
                     ? CUBLAS_COMPUTE_32F_FAST_TF32
                     : CUBLAS_COMPUTE_32F;
  if (m < 0 || n < 0 || k < 0)
    return Status::error("Blas::gemm: negative size (" + plan.describe() +
                         ")");
  // cuBLAS needs leading dimensions >= 1 even for empty matrices.
  if (plan.lda < (k > 1 ? k : 1) || plan.ldb < (k > 1 ? k : 1) ||
      plan.ldc < (n > 1 ? n : 1))
    return Status::error("Blas::gemm: leading dimension smaller than the row "
                         "length (" +
                         plan.describe() + ")");
  if (m > 0 && n > 0 && (!c || (k > 0 && (!a || !b))))
    return Status::error("Blas::gemm: null operand (" + plan.describe() + ")");
  return plan;
}

} // namespace

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  }
  return "?";
}

std::size_t elementSize(ElementType type) {
  return type == ElementType::F32 ? 4 : 2;
}

bool Blas::available() { return blasLibrary().ok(); }

Status Blas::libraryStatus() {
  Result<const BlasLibrary *> library = blasLibrary();
  return library ? Status::success() : library.status();
}

Result<Blas> Blas::create(const Stream &stream) {
  Result<const Driver *> driver = Driver::get();
  if (!driver)
    return driver.status();
  Result<const BlasLibrary *> library = blasLibrary();
  if (!library)
    return library.status();
  if (!stream.valid())
    return Status::error("Blas::create: empty stream");
  const BlasApi &api = (*library)->api;

  // cuBLAS recommends 32 MiB of workspace on Hopper and later, 4 MiB before.
  const DeviceProperties &props = (*driver)->device(stream.device());
  std::size_t workspaceBytes =
      props.computeMajor >= 9 ? 32u << 20 : 4u << 20;

  Blas blas;
  Result<DeviceBuffer> workspace = DeviceBuffer::allocate(workspaceBytes);
  if (!workspace)
    return workspace.status().withContext("Blas::create: workspace");
  blas.workspace_ = workspace.take();
  CONDENSATE_RETURN_IF_ERROR(checkBlas(
      api, api.cublasCreate_v2(blas.handle_.out()), "cublasCreate_v2"));
  CONDENSATE_RETURN_IF_ERROR(checkBlas(
      api, api.cublasSetMathMode(blas.raw(), CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode"));
  CONDENSATE_RETURN_IF_ERROR(blas.setStream(stream));
  return blas;
}

void detail::destroyBlas(BlasHandle raw) noexcept {
  Result<const BlasLibrary *> library = blasLibrary();
  if (library)
    (void)(*library)->api.cublasDestroy_v2(raw);
}

Status Blas::setStream(const Stream &stream) {
  if (!valid() || !stream.valid())
    return Status::error("Blas::setStream: empty handle or stream");
  const BlasApi &api = (*blasLibrary())->api;
  CONDENSATE_RETURN_IF_ERROR(checkBlas(
      api, api.cublasSetStream_v2(raw(), stream.raw()), "cublasSetStream_v2"));
  // cublasSetStream resets the workspace to cuBLAS's own pool, which may
  // allocate (and so break graph capture); re-attach ours.
  return checkBlas(api,
                   api.cublasSetWorkspace_v2(
                       raw(), reinterpret_cast<void *>(workspace_.address()),
                       workspace_.size()),
                   "cublasSetWorkspace_v2");
}

Status Blas::gemm(int m, int n, int k, ElementType inputType, DevicePtr a,
                  DevicePtr b, DevicePtr c, const GemmOptions &options) {
  if (!valid())
    return Status::error("Blas::gemm: empty handle");
  Result<GemmPlan> plan = planGemm(m, n, k, inputType, a, b, c, options);
  if (!plan)
    return plan.status();
  if (m == 0 || n == 0)
    return Status::success();
  const BlasApi &api = (*blasLibrary())->api;
  auto *pa = reinterpret_cast<const void *>(a);
  auto *pb = reinterpret_cast<const void *>(b);
  auto *pc = reinterpret_cast<void *>(c);
  // See Blas.h: column-major C^T[N, M] = op_T(B) * op_N(A^T).
  cublasStatus_t status;
  const char *call;
  if (inputType == ElementType::F32 && !options.allowTf32) {
    call = "cublasSgemm_v2";
    status = api.cublasSgemm_v2(
        raw(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &options.alpha,
        static_cast<const float *>(pb), plan->ldb,
        static_cast<const float *>(pa), plan->lda, &options.beta,
        static_cast<float *>(pc), plan->ldc);
  } else {
    call = "cublasGemmEx";
    cudaDataType abType = dataType(inputType);
    status = api.cublasGemmEx(raw(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k,
                              &options.alpha, pb, abType, plan->ldb, pa,
                              abType, plan->lda, &options.beta, pc, CUDA_R_32F,
                              plan->ldc, plan->compute, CUBLAS_GEMM_DEFAULT);
  }
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return checkBlas(api, status, call, plan->describe());
}

Status Blas::gemmStridedBatched(int batch, int m, int n, int k,
                                ElementType inputType, DevicePtr a,
                                long long strideA, DevicePtr b,
                                long long strideB, DevicePtr c,
                                long long strideC,
                                const GemmOptions &options) {
  if (!valid())
    return Status::error("Blas::gemmStridedBatched: empty handle");
  if (batch < 0 || strideA < 0 || strideB < 0 || strideC < 0)
    return Status::error("Blas::gemmStridedBatched: negative batch or stride");
  Result<GemmPlan> plan = planGemm(m, n, k, inputType, a, b, c, options);
  if (!plan)
    return plan.status();
  if (batch == 0 || m == 0 || n == 0)
    return Status::success();
  const BlasApi &api = (*blasLibrary())->api;
  cudaDataType abType = dataType(inputType);
  cublasStatus_t status = api.cublasGemmStridedBatchedEx(
      raw(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &options.alpha,
      reinterpret_cast<const void *>(b), abType, plan->ldb, strideB,
      reinterpret_cast<const void *>(a), abType, plan->lda, strideA,
      &options.beta, reinterpret_cast<void *>(c), CUDA_R_32F, plan->ldc,
      strideC, batch, plan->compute, CUBLAS_GEMM_DEFAULT);
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return checkBlas(api, status, "cublasGemmStridedBatchedEx",
                   plan->describe() + " batch=" + std::to_string(batch));
}

Result<int> Blas::version() const {
  if (!valid())
    return Status::error("Blas::version: empty handle");
  const BlasApi &api = (*blasLibrary())->api;
  int version = 0;
  CONDENSATE_RETURN_IF_ERROR(checkBlas(
      api, api.cublasGetVersion_v2(raw(), &version), "cublasGetVersion_v2"));
  return version;
}

} // namespace cuda
} // namespace condensate
