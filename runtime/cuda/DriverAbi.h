//===- DriverAbi.h - The subset of cuda.h that the runtime calls ----------===//
//
// Private to runtime/cuda/ (not installed): no public header includes it.
//
// The runtime loads libcuda.so.1 with dlopen at run time, so it must not need
// cuda.h to build. This header declares, by hand, the handful of driver-API
// types, enumerators and entry-point signatures the runtime uses, copied from
// cuda.h of CUDA 12/13 (CUDA_VERSION 13000 was checked).
//
// Handle types are the public cuda::StreamHandle, ..., which reuse cuda.h's
// global struct tags (CUstream_st, ...), so an abi::CUstream *is* a cuda.h
// CUstream (and a runtime-API cudaStream_t). Enumerations are our own, with int as their fixed underlying type
// (cuda.h's are 4 bytes too); only the enumerators we use are listed.
//
// test/unit/cuda/CudaAbiCheck.cpp static_asserts all of this against the real
// cuda.h whenever the toolkit is present at configure time; its CMakeLists
// reads every enumerator line of this file ("  NAME = value," or
// "  X(NAME, value)") so that none can be added unchecked.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_CUDA_DRIVERABI_H
#define CONDENSATE_RUNTIME_CUDA_DRIVERABI_H

#include "condensate/Cuda/Driver.h"

#include <cstddef>
#include <cstdint>

struct CUgraphNode_st;

namespace condensate {
namespace cuda {
namespace abi {

// Driver.h declares the opaque handle types under cuda.h's struct tags;
// these are the same types under cuda.h's names.
using CUdevice = int;
using CUdeviceptr = unsigned long long; // cuda.h: LP64 CUdeviceptr_v2
using cuuint64_t = std::uint64_t;
using CUcontext = ContextHandle;
using CUmodule = ModuleHandle;
using CUfunction = FunctionHandle;
using CUstream = StreamHandle;
using CUevent = EventHandle;
using CUgraph = GraphHandle;
using CUgraphNode = ::CUgraphNode_st *;
using CUgraphExec = GraphExecHandle;
static_assert(sizeof(CUdeviceptr) == sizeof(DevicePtr),
              "DevicePtr holds a CUdeviceptr");

/// cudaError_enum, as X(name, value): the codes we name ourselves when the
/// driver cannot. Any int the driver returns is a valid value of CUresult.
#define CONDENSATE_CUDA_RESULTS(X)                                             \
  X(CUDA_SUCCESS, 0)                                                           \
  X(CUDA_ERROR_INVALID_VALUE, 1)                                               \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                                               \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                                             \
  X(CUDA_ERROR_DEINITIALIZED, 4)                                               \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                                               \
  X(CUDA_ERROR_NO_DEVICE, 100)                                                 \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                                            \
  X(CUDA_ERROR_INVALID_IMAGE, 200)                                             \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                                           \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)                                         \
  X(CUDA_ERROR_INVALID_PTX, 218)                                               \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)                                   \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                                            \
  X(CUDA_ERROR_NOT_FOUND, 500)                                                 \
  X(CUDA_ERROR_NOT_READY, 600)                                                 \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                                           \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701)                                   \
  X(CUDA_ERROR_LAUNCH_FAILED, 719)                                             \
  X(CUDA_ERROR_NOT_SUPPORTED, 801)                                             \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)                                \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)                                \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910)                                 \
  X(CUDA_ERROR_UNKNOWN, 999)

/// An enumerator of an X(name, value) list, and a switch case returning its
/// name (for messages about codes the library cannot name itself).
#define CONDENSATE_CUDA_ENUMERATOR(name, value) name = value,
#define CONDENSATE_CUDA_NAME_CASE(name, value)                                 \
  case name:                                                                   \
    return #name;

enum CUresult : int { CONDENSATE_CUDA_RESULTS(CONDENSATE_CUDA_ENUMERATOR) };

/// CUdevice_attribute (subset).
enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

/// CUfunction_attribute (subset).
enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

/// CUjit_option (subset).
enum CUjit_option : int {
  CU_JIT_MAX_REGISTERS = 0,
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_JIT_LOG_VERBOSE = 12,
  CU_JIT_GENERATE_LINE_INFO = 13,
};

/// CUstream_flags.
enum CUstream_flags : int {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,
};

/// CUevent_flags.
enum CUevent_flags : int {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
};

/// CUstreamCaptureStatus.
enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};

/// CUstreamCaptureMode.
enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

/// CUgraphInstantiate_flags (a bit set passed as unsigned long long).
enum CUgraphInstantiate_flags : int {
  CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};

/// CUgraphExecUpdateResult, as X(name, value).
#define CONDENSATE_CUDA_GRAPH_EXEC_UPDATE_RESULTS(X)                           \
  X(CU_GRAPH_EXEC_UPDATE_SUCCESS, 0x0)                                         \
  X(CU_GRAPH_EXEC_UPDATE_ERROR, 0x1)                                           \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, 0x2)                          \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, 0x3)                         \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED, 0x4)                          \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, 0x5)                        \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, 0x6)                             \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, 0x7)               \
  X(CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED, 0x8)

enum CUgraphExecUpdateResult : int {
  CONDENSATE_CUDA_GRAPH_EXEC_UPDATE_RESULTS(CONDENSATE_CUDA_ENUMERATOR)
};

/// CUgraphExecUpdateResultInfo (CUgraphExecUpdateResultInfo_v1).
struct CUgraphExecUpdateResultInfo {
  CUgraphExecUpdateResult result;
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

/// CUlaunchAttributeID: the one launch attribute the runtime sets.
enum CUlaunchAttributeID : int {
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};

/// CUlaunchAttributeValue: a 64-byte union (8-byte aligned: some members
/// hold pointers); the runtime sets one member.
union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  unsigned int programmaticStreamSerializationAllowed;
};

/// CUlaunchAttribute (CUlaunchAttribute_st).
struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
};

/// CUlaunchConfig (CUlaunchConfig_st), what cuLaunchKernelEx reads.
struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
};

// Every entry point the runtime resolves, as
//   X(symbol, return type, (parameters), required)
// `symbol` is the versioned name that cuda.h's macros map the plain API name
// to (cuMemAlloc -> cuMemAlloc_v2, ...), i.e. what a program compiled against
// cuda.h links to. Optional entries may be missing from older drivers; their
// pointer is then null. Legacy (non per-thread) default-stream variants are
// used; the runtime never launches on stream 0.
#define CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(X)                                 \
  X(cuGetErrorName, CUresult, (CUresult error, const char **pStr), true)       \
  X(cuGetErrorString, CUresult, (CUresult error, const char **pStr), true)     \
  X(cuInit, CUresult, (unsigned int Flags), true)                              \
  X(cuDriverGetVersion, CUresult, (int *driverVersion), true)                  \
  X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal), true)             \
  X(cuDeviceGetCount, CUresult, (int *count), true)                            \
  X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev), true)      \
  X(cuDeviceGetAttribute, CUresult,                                            \
    (int *pi, CUdevice_attribute attrib, CUdevice dev), true)                  \
  X(cuDeviceTotalMem_v2, CUresult, (std::size_t * bytes, CUdevice dev), true)  \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * pctx, CUdevice dev),      \
    true)                                                                      \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev), true)              \
  X(cuCtxSetCurrent, CUresult, (CUcontext ctx), true)                          \
  X(cuCtxGetCurrent, CUresult, (CUcontext * pctx), true)                       \
  X(cuCtxGetDevice, CUresult, (CUdevice * device), true)                       \
  X(cuCtxSynchronize, CUresult, (), true)                                      \
  X(cuProfilerStart, CUresult, (), false)                                      \
  X(cuProfilerStop, CUresult, (), false)                                       \
  X(cuMemGetInfo_v2, CUresult, (std::size_t * free, std::size_t * total),      \
    true)                                                                      \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * dptr, std::size_t bytesize), true) \
  X(cuMemFree_v2, CUresult, (CUdeviceptr dptr), true)                          \
  X(cuMemcpyHtoD_v2, CUresult,                                                 \
    (CUdeviceptr dstDevice, const void *srcHost, std::size_t ByteCount), true) \
  X(cuMemcpyDtoH_v2, CUresult,                                                 \
    (void *dstHost, CUdeviceptr srcDevice, std::size_t ByteCount), true)       \
  X(cuMemcpyHtoDAsync_v2, CUresult,                                            \
    (CUdeviceptr dstDevice, const void *srcHost, std::size_t ByteCount,        \
     CUstream hStream),                                                        \
    true)                                                                      \
  X(cuMemcpyDtoHAsync_v2, CUresult,                                            \
    (void *dstHost, CUdeviceptr srcDevice, std::size_t ByteCount,              \
     CUstream hStream),                                                        \
    true)                                                                      \
  X(cuMemcpyDtoDAsync_v2, CUresult,                                            \
    (CUdeviceptr dstDevice, CUdeviceptr srcDevice, std::size_t ByteCount,      \
     CUstream hStream),                                                        \
    true)                                                                      \
  X(cuMemsetD8Async, CUresult,                                                 \
    (CUdeviceptr dstDevice, unsigned char uc, std::size_t N,                   \
     CUstream hStream),                                                        \
    true)                                                                      \
  X(cuMemsetD32Async, CUresult,                                                \
    (CUdeviceptr dstDevice, unsigned int ui, std::size_t N, CUstream hStream), \
    true)                                                                      \
  X(cuStreamCreate, CUresult, (CUstream * phStream, unsigned int Flags), true) \
  X(cuStreamDestroy_v2, CUresult, (CUstream hStream), true)                    \
  X(cuStreamSynchronize, CUresult, (CUstream hStream), true)                   \
  X(cuStreamQuery, CUresult, (CUstream hStream), true)                         \
  X(cuStreamWaitEvent, CUresult,                                               \
    (CUstream hStream, CUevent hEvent, unsigned int Flags), true)              \
  X(cuEventCreate, CUresult, (CUevent * phEvent, unsigned int Flags), true)    \
  X(cuEventDestroy_v2, CUresult, (CUevent hEvent), true)                       \
  X(cuEventRecord, CUresult, (CUevent hEvent, CUstream hStream), true)         \
  X(cuEventSynchronize, CUresult, (CUevent hEvent), true)                      \
  X(cuEventQuery, CUresult, (CUevent hEvent), true)                            \
  /* CUDA 12.8+ name; older drivers only export the same-ABI                   \
     "cuEventElapsedTime", which the loader falls back to. */                  \
  X(cuEventElapsedTime_v2, CUresult,                                           \
    (float *pMilliseconds, CUevent hStart, CUevent hEnd), true)                \
  X(cuModuleLoadDataEx, CUresult,                                              \
    (CUmodule * module, const void *image, unsigned int numOptions,            \
     CUjit_option *options, void **optionValues),                              \
    true)                                                                      \
  X(cuModuleUnload, CUresult, (CUmodule hmod), true)                           \
  X(cuModuleGetFunction, CUresult,                                             \
    (CUfunction * hfunc, CUmodule hmod, const char *name), true)               \
  X(cuModuleGetGlobal_v2, CUresult,                                            \
    (CUdeviceptr * dptr, std::size_t * bytes, CUmodule hmod,                   \
     const char *name),                                                        \
    true)                                                                      \
  X(cuFuncGetAttribute, CUresult,                                              \
    (int *pi, CUfunction_attribute attrib, CUfunction hfunc), true)            \
  X(cuFuncSetAttribute, CUresult,                                              \
    (CUfunction hfunc, CUfunction_attribute attrib, int value), true)          \
  X(cuLaunchKernel, CUresult,                                                  \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,               \
     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,    \
     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,    \
     void **kernelParams, void **extra),                                       \
    true)                                                                      \
  /* CUDA 12.0+: launches with attributes (programmatic dependent launch). */  \
  X(cuLaunchKernelEx, CUresult,                                                \
    (const CUlaunchConfig *config, CUfunction f, void **kernelParams,          \
     void **extra),                                                            \
    false)                                                                     \
  X(cuStreamBeginCapture_v2, CUresult,                                         \
    (CUstream hStream, CUstreamCaptureMode mode), true)                        \
  X(cuStreamEndCapture, CUresult, (CUstream hStream, CUgraph * phGraph), true) \
  X(cuStreamIsCapturing, CUresult,                                             \
    (CUstream hStream, CUstreamCaptureStatus * captureStatus), true)           \
  X(cuGraphDestroy, CUresult, (CUgraph hGraph), true)                          \
  X(cuGraphInstantiateWithFlags, CUresult,                                     \
    (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),     \
    true)                                                                      \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec hGraphExec), true)              \
  X(cuGraphLaunch, CUresult, (CUgraphExec hGraphExec, CUstream hStream), true) \
  X(cuGraphUpload, CUresult, (CUgraphExec hGraphExec, CUstream hStream), true) \
  /* CUDA 12.0+. */                                                            \
  X(cuGraphExecUpdate_v2, CUresult,                                            \
    (CUgraphExec hGraphExec, CUgraph hGraph,                                   \
     CUgraphExecUpdateResultInfo * resultInfo),                                \
    false)

// One function-pointer type per entry point: abi::PFN_cuInit, ...
#define CONDENSATE_CUDA_DECLARE_PFN(name, ret, params, required)               \
  using PFN_##name = ret(*) params;
CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_CUDA_DECLARE_PFN)
#undef CONDENSATE_CUDA_DECLARE_PFN

/// The resolved driver entry points; a member is null only if optional and
/// missing from the loaded driver.
struct DriverApi {
#define CONDENSATE_CUDA_DECLARE_MEMBER(name, ret, params, required)            \
  PFN_##name name = nullptr;
  CONDENSATE_CUDA_DRIVER_ENTRY_POINTS(CONDENSATE_CUDA_DECLARE_MEMBER)
#undef CONDENSATE_CUDA_DECLARE_MEMBER
};

} // namespace abi
} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_RUNTIME_CUDA_DRIVERABI_H
