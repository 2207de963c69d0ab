//===- CudaAbiCheck.cpp - Hand-written CUDA declarations vs. the toolkit --===//
//
// Compile-only check, built when cuda.h (and, for the cuBLAS half,
// cublas_api.h) exist at configure time: every type, enumerator and entry
// point that runtime/cuda/DriverAbi.h and BlasAbi.h (private to the CUDA
// layer) declare by hand must match the toolkit's headers. A mismatch fails
// the build; the program itself only prints what was checked.
//
//===----------------------------------------------------------------------===//
#include "BlasAbi.h"
#include "DriverAbi.h"

#include <cuda.h>
#include <cudaProfiler.h>
#if CONDENSATE_HAVE_CUBLAS_API_H
#include <cublas_api.h>
#include <library_types.h>
#endif

#include <cstddef>
#include <cstdio>
#include <type_traits>

namespace abi = condensate::cuda::abi;

namespace {

// ToReal<T>: our declared type T with each of our enums and structs replaced
// by the toolkit's. Each pair must have the same size (checked below), and
// handle and integer types are already the toolkit's own.
template <typename T> struct ToReal { using type = T; };
template <typename T> using ToRealT = typename ToReal<T>::type;
template <typename T> struct ToReal<T *> { using type = ToRealT<T> *; };
template <typename T> struct ToReal<const T> { using type = const ToRealT<T>; };
template <typename R, typename... P> struct ToReal<R(P...)> {
  using type = ToRealT<R>(ToRealT<P>...);
};

#define CONDENSATE_MAP_TYPE(ours, theirs)                                      \
  template <> struct ToReal<ours> { using type = theirs; };                    \
  static_assert(sizeof(ours) == sizeof(theirs), #ours " has the wrong size");  \
  static_assert(alignof(ours) == alignof(theirs), #ours " has the wrong alignment");

CONDENSATE_MAP_TYPE(abi::CUresult, ::CUresult)
CONDENSATE_MAP_TYPE(abi::CUdevice_attribute, ::CUdevice_attribute)
CONDENSATE_MAP_TYPE(abi::CUfunction_attribute, ::CUfunction_attribute)
CONDENSATE_MAP_TYPE(abi::CUjit_option, ::CUjit_option)
CONDENSATE_MAP_TYPE(abi::CUstream_flags, ::CUstream_flags)
CONDENSATE_MAP_TYPE(abi::CUevent_flags, ::CUevent_flags)
CONDENSATE_MAP_TYPE(abi::CUstreamCaptureStatus, ::CUstreamCaptureStatus)
CONDENSATE_MAP_TYPE(abi::CUstreamCaptureMode, ::CUstreamCaptureMode)
CONDENSATE_MAP_TYPE(abi::CUgraphInstantiate_flags, ::CUgraphInstantiate_flags)
CONDENSATE_MAP_TYPE(abi::CUgraphExecUpdateResult, ::CUgraphExecUpdateResult)
CONDENSATE_MAP_TYPE(abi::CUgraphExecUpdateResultInfo,
                    ::CUgraphExecUpdateResultInfo)
CONDENSATE_MAP_TYPE(abi::CUlaunchAttributeID, ::CUlaunchAttributeID)
CONDENSATE_MAP_TYPE(abi::CUlaunchAttributeValue, ::CUlaunchAttributeValue)
CONDENSATE_MAP_TYPE(abi::CUlaunchAttribute, ::CUlaunchAttribute)
CONDENSATE_MAP_TYPE(abi::CUlaunchConfig, ::CUlaunchConfig)
#if CONDENSATE_HAVE_CUBLAS_API_H
CONDENSATE_MAP_TYPE(abi::cublasStatus_t, ::cublasStatus_t)
CONDENSATE_MAP_TYPE(abi::cublasOperation_t, ::cublasOperation_t)
CONDENSATE_MAP_TYPE(abi::cublasMath_t, ::cublasMath_t)
CONDENSATE_MAP_TYPE(abi::cudaDataType, ::cudaDataType)
CONDENSATE_MAP_TYPE(abi::cublasComputeType_t, ::cublasComputeType_t)
CONDENSATE_MAP_TYPE(abi::cublasGemmAlgo_t, ::cublasGemmAlgo_t)
#endif
#undef CONDENSATE_MAP_TYPE

// Handle and scalar types are the toolkit's own types, not look-alikes.
static_assert(std::is_same<abi::CUdevice, ::CUdevice>::value, "CUdevice");
static_assert(std::is_same<abi::CUdeviceptr, ::CUdeviceptr>::value,
              "CUdeviceptr");
static_assert(std::is_same<abi::cuuint64_t, ::cuuint64_t>::value,
              "cuuint64_t");
static_assert(std::is_same<abi::CUcontext, ::CUcontext>::value, "CUcontext");
static_assert(std::is_same<abi::CUmodule, ::CUmodule>::value, "CUmodule");
static_assert(std::is_same<abi::CUfunction, ::CUfunction>::value,
              "CUfunction");
static_assert(std::is_same<abi::CUstream, ::CUstream>::value, "CUstream");
static_assert(std::is_same<abi::CUevent, ::CUevent>::value, "CUevent");
static_assert(std::is_same<abi::CUgraph, ::CUgraph>::value, "CUgraph");
static_assert(std::is_same<abi::CUgraphNode, ::CUgraphNode>::value,
              "CUgraphNode");
static_assert(std::is_same<abi::CUgraphExec, ::CUgraphExec>::value,
              "CUgraphExec");
#if CONDENSATE_HAVE_CUBLAS_API_H
static_assert(std::is_same<abi::cublasHandle_t, ::cublasHandle_t>::value,
              "cublasHandle_t");
static_assert(std::is_same<abi::cudaStream_t, ::cudaStream_t>::value,
              "cudaStream_t");
#endif

// The structs, field by field.
static_assert(offsetof(abi::CUgraphExecUpdateResultInfo, result) ==
                  offsetof(::CUgraphExecUpdateResultInfo, result),
              "CUgraphExecUpdateResultInfo::result");
static_assert(offsetof(abi::CUgraphExecUpdateResultInfo, errorNode) ==
                  offsetof(::CUgraphExecUpdateResultInfo, errorNode),
              "CUgraphExecUpdateResultInfo::errorNode");
static_assert(offsetof(abi::CUgraphExecUpdateResultInfo, errorFromNode) ==
                  offsetof(::CUgraphExecUpdateResultInfo, errorFromNode),
              "CUgraphExecUpdateResultInfo::errorFromNode");
#define CONDENSATE_CHECK_FIELD(type, field)                                    \
  static_assert(offsetof(abi::type, field) == offsetof(::type, field),         \
                #type "::" #field);
CONDENSATE_CHECK_FIELD(CUlaunchAttributeValue,
                       programmaticStreamSerializationAllowed)
CONDENSATE_CHECK_FIELD(CUlaunchAttribute, id)
CONDENSATE_CHECK_FIELD(CUlaunchAttribute, value)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, gridDimX)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, gridDimY)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, gridDimZ)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, blockDimX)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, blockDimY)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, blockDimZ)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, sharedMemBytes)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, hStream)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, attrs)
CONDENSATE_CHECK_FIELD(CUlaunchConfig, numAttrs)
#undef CONDENSATE_CHECK_FIELD

// Every enumerator we declare (the list is generated from our headers at
// configure time, see CMakeLists.txt) has the toolkit's value.
#define CONDENSATE_CHECK_ENUMERATOR(name)                                      \
  static_assert(static_cast<long long>(abi::name) ==                           \
                    static_cast<long long>(::name),                            \
                #name " has the wrong value");
#include "CudaAbiDriverEnumerators.inc"
#if CONDENSATE_HAVE_CUBLAS_API_H
#include "CudaAbiBlasEnumerators.inc"
#endif
#undef CONDENSATE_CHECK_ENUMERATOR

// Every entry point: the toolkit declares (as one of its overloads, for
// cublasGemmEx) a function of exactly our signature with our types mapped to
// its own. static_cast to a function-pointer type selects only an exact
// match, so any difference in a parameter or return type fails to compile.
#define CONDENSATE_CHECK_ENTRY_POINT(name, ret, params, required)              \
  static_assert(                                                               \
      std::is_same<decltype(static_cast<ToRealT<abi::PFN_##name>>(&::name)),   \
                   ToRealT<abi::PFN_##name>>::value,                           \
      #name " has the wrong signature");
#define CONDENSATE_COUNT(name, ret, params, required) +1

constexpr int kDriverEntryPoints =
    0 CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_COUNT);
CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_CHECK_ENTRY_POINT)
#if CONDENSATE_HAVE_CUBLAS_API_H
constexpr int kBlasEntryPoints =
    0 CONDENSATE_CUBLAS_ENTRY_POINTS(CONDENSATE_COUNT);
CONDENSATE_CUBLAS_ENTRY_POINTS(CONDENSATE_CHECK_ENTRY_POINT)
#else
constexpr int kBlasEntryPoints = 0;
#endif
#undef CONDENSATE_CHECK_ENTRY_POINT
#undef CONDENSATE_COUNT

} // namespace

int main() {
  std::printf("CUDA ABI declarations match cuda.h (CUDA_VERSION %d): %d "
              "driver entry points\n",
              CUDA_VERSION, kDriverEntryPoints);
#if CONDENSATE_HAVE_CUBLAS_API_H
  std::printf("cuBLAS ABI declarations match cublas_api.h (CUBLAS_VERSION "
              "%d): %d entry points\n",
              CUBLAS_VERSION, kBlasEntryPoints);
#else
  std::printf("cublas_api.h not found: cuBLAS declarations unchecked (%d)\n",
              kBlasEntryPoints);
#endif
  return 0;
}
