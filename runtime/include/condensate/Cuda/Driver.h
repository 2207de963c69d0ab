//===- Driver.h - CUDA driver API, loaded at run time ---------------------===//
//
// RAII wrappers over the CUDA driver API. libcuda.so.1 is opened with dlopen
// on first use, so binaries that link this library build without the CUDA
// toolkit and run (reporting "no GPU") on machines without a driver.
//
// Contexts: Context retains a device's *primary* context (the one the CUDA
// runtime API, cuBLAS and PyTorch use) and makes it current on the calling
// thread. Streams, events, buffers, modules and graphs are created in the
// calling thread's current context and must be destroyed before the Context
// that retains it.
//
// Errors: every fallible call returns a Status or Result; a driver failure
// reads "<call> failed: <CUDA_ERROR_NAME> (<driver's description>)".
//
// Nothing of the driver's own header shows here: handles are pointers to
// opaque structs, addresses are integers, and the entry points, enumerations
// and the library itself stay private to runtime/cuda/ (DriverAbi.h). The
// implementation is split by resource: DriverSymbols.cpp (dlopen, entry
// points, errors), Device.cpp (devices, Context), Memory.cpp (DeviceBuffer),
// Module.cpp (Module, Function), Launch.cpp (launch, KernelArgs), Stream.cpp
// (Stream, Event) and Graph.cpp (capture, Graph, GraphExec).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CUDA_DRIVER_H
#define CONDENSATE_CUDA_DRIVER_H

#include "condensate/Cuda/Handle.h"
#include "condensate/Support/Status.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// Opaque driver objects, under the driver's own struct tags so that a raw()
// handle is the very type other CUDA libraries take (a StreamHandle is a
// CUstream and a cudaStream_t) and passes to them without casts.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace condensate {
namespace cuda {

using ContextHandle = ::CUctx_st *;
using ModuleHandle = ::CUmod_st *;
using FunctionHandle = ::CUfunc_st *;
using StreamHandle = ::CUstream_st *;
using EventHandle = ::CUevent_st *;
using GraphHandle = ::CUgraph_st *;
using GraphExecHandle = ::CUgraphExec_st *;

/// A device address (the driver's 64-bit device pointer).
using DevicePtr = std::uint64_t;

class Event;
class GraphExec;

/// The raw values the owning classes below hold (see Handle.h), and how
/// each is destroyed: the destroy functions live beside their class in
/// runtime/cuda/.
namespace detail {
/// A retained primary context and the device whose it is (releasing it
/// takes the device).
struct PrimaryContext {
  ContextHandle context = nullptr;
  int device = -1;
  friend bool operator==(const PrimaryContext &a, const PrimaryContext &b) {
    return a.context == b.context && a.device == b.device;
  }
};
/// A stream, the device of its context, and whether we only borrowed it
/// (then it is never destroyed, and may be the legacy default stream 0).
struct StreamRef {
  StreamHandle stream = nullptr;
  int device = -1;
  bool borrowed = false;
  friend bool operator==(const StreamRef &a, const StreamRef &b) {
    return a.stream == b.stream && a.device == b.device &&
           a.borrowed == b.borrowed;
  }
};
/// A cuMemAlloc allocation (empty for size 0).
struct Allocation {
  DevicePtr address = 0;
  std::size_t bytes = 0;
  friend bool operator==(const Allocation &a, const Allocation &b) {
    return a.address == b.address && a.bytes == b.bytes;
  }
};

void releasePrimaryContext(PrimaryContext raw) noexcept; // Device.cpp
void destroyStream(StreamRef raw) noexcept;              // Stream.cpp
void destroyEvent(EventHandle raw) noexcept;             // Stream.cpp
void freeAllocation(Allocation raw) noexcept;            // Memory.cpp
void unloadModule(ModuleHandle raw) noexcept;            // Module.cpp
void destroyGraph(GraphHandle raw) noexcept;             // Graph.cpp
void destroyGraphExec(GraphExecHandle raw) noexcept;     // Graph.cpp
/// Ends the capture on the stream and discards the partial graph.
void abandonCapture(StreamHandle raw) noexcept; // Graph.cpp
} // namespace detail

/// Grid or block extent of a launch.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3() = default;
  constexpr Dim3(unsigned dimX, unsigned dimY = 1, unsigned dimZ = 1)
      : x(dimX), y(dimY), z(dimZ) {}
};

/// Launch limits of a device. The defaults are those every sm_70+ GPU has
/// (shared memory: the 48 KiB available without opting in).
struct LaunchLimits {
  Dim3 maxGrid{2147483647u, 65535u, 65535u};
  Dim3 maxBlock{1024u, 1024u, 64u};
  unsigned maxThreadsPerBlock = 1024;
  /// Dynamic shared memory a launch may request after opting in with
  /// Function::setMaxDynamicSharedMemory (CU_..._PER_BLOCK_OPTIN).
  unsigned maxSharedBytesOptin = 48 * 1024;
};

/// Properties of one device, read once when the driver is loaded.
struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int computeMajor = 0;
  int computeMinor = 0;
  int multiprocessorCount = 0;
  int warpSize = 32;
  int maxSharedBytesPerBlock = 0;      ///< without opting in (48 KiB)
  int maxSharedBytesPerBlockOptin = 0; ///< after opting in (227 KiB on sm_90)
  int maxSharedBytesPerMultiprocessor = 0;
  int maxRegistersPerBlock = 0;
  int maxThreadsPerMultiprocessor = 0;
  int l2CacheBytes = 0;
  std::size_t totalMemoryBytes = 0;
  LaunchLimits limits;

  /// e.g. 90 for sm_90.
  int computeCapability() const { return computeMajor * 10 + computeMinor; }
};

/// The loaded driver: a process-wide cache, initialised on the first call to
/// get() (thread-safe, C++11 static initialisation) and never unloaded, so
/// that handles destroyed during static destruction still find the driver.
/// It holds only immutable data after initialisation. (The library and its
/// entry points are held by the private class that derives from this one.)
class Driver {
public:
  /// The driver, or why it cannot be used (library missing, cuInit failed,
  /// e.g. CUDA_ERROR_NO_DEVICE). The outcome is cached: later calls return
  /// the same pointer or the same error.
  static Result<const Driver *> get();
  /// True if get() succeeds: libcuda.so.1 loads, cuInit(0) succeeds and at
  /// least one device is visible.
  static bool available();

  /// Number of devices (>= 1).
  int deviceCount() const { return static_cast<int>(devices_.size()); }
  /// Properties of device `ordinal`, or an error if out of range.
  Result<DeviceProperties> deviceProperties(int ordinal) const;
  /// As above, without the copy; `ordinal` must be valid.
  const DeviceProperties &device(int ordinal) const;
  /// cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
  int driverVersion() const { return driverVersion_; }

  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

protected:
  Driver() = default;
  ~Driver() = default;

  int driverVersion_ = 0;
  std::vector<DeviceProperties> devices_;
};

/// A retained primary context, current on the thread that created it.
/// Destroying it releases the primary context (which is destroyed when its
/// last user, including the CUDA runtime, releases it).
class Context {
public:
  /// Retains device `ordinal`'s primary context and makes it current.
  static Result<Context> primary(int ordinal = 0);

  /// Makes this context current on the calling thread (needed once per
  /// thread that issues work).
  Status makeCurrent() const;
  /// Makes the context current on this thread, then waits for all its work.
  Status synchronize() const;
  /// Makes the context current on this thread, then returns (free, total)
  /// device memory in bytes.
  Result<std::pair<std::size_t, std::size_t>> memoryInfo() const;
  /// Makes the context current on this thread, then starts (`on`) or stops
  /// the profiler's collection (cuProfilerStart/Stop: what `ncu
  /// --profile-from-start off` profiles); an error where the driver lacks
  /// the entry points.
  Status setProfiling(bool on) const;

  bool valid() const { return handle_.get().context != nullptr; }
  int device() const { return handle_.get().device; }
  const DeviceProperties &properties() const;
  ContextHandle raw() const { return handle_.get().context; }

private:
  Handle<detail::PrimaryContext, detail::releasePrimaryContext> handle_;
};

/// A non-blocking stream (does not synchronise with stream 0).
class Stream {
public:
  /// Creates a stream in the current context.
  static Result<Stream> create();
  /// Wraps a stream someone else owns (e.g. a framework's current stream,
  /// possibly the legacy default stream 0) without taking ownership.
  static Stream borrow(StreamHandle raw, int device);

  Status synchronize() const;
  /// True if all work has completed, false if some is pending.
  Result<bool> query() const;
  /// Makes future work on this stream wait for `event`.
  Status wait(const Event &event) const;
  /// True while the stream is capturing into a graph.
  Result<bool> isCapturing() const;

  bool valid() const {
    return handle_.get().stream != nullptr || handle_.get().borrowed;
  }
  /// Device ordinal of the context the stream was created in.
  int device() const { return handle_.get().device; }
  /// Also usable as a runtime-API cudaStream_t.
  StreamHandle raw() const { return handle_.get().stream; }

private:
  Handle<detail::StreamRef, detail::destroyStream> handle_;
};

/// A CUDA event, by default with timing enabled.
class Event {
public:
  static Result<Event> create(bool enableTiming = true);

  Status record(const Stream &stream) const;
  Status synchronize() const;
  /// True if the recorded work has completed.
  Result<bool> query() const;
  /// Milliseconds between two recorded, completed timing events.
  static Result<float> elapsedMs(const Event &start, const Event &end);

  bool valid() const { return !handle_.empty(); }
  EventHandle raw() const { return handle_.get(); }

private:
  Handle<EventHandle, detail::destroyEvent> handle_;
};

/// Device memory from cuMemAlloc. Size 0 is allowed (null address, all copies
/// of 0 bytes succeed). Offsets and sizes are in bytes and bounds-checked.
class DeviceBuffer {
public:
  static Result<DeviceBuffer> allocate(std::size_t bytes);

  DevicePtr address() const { return handle_.get().address; }
  std::size_t size() const { return handle_.get().bytes; }

  /// Synchronous copies: they return once the data has arrived. They run on
  /// the legacy default stream, so they do not wait for work queued on
  /// (non-blocking) Streams: synchronise those first.
  Status copyFromHost(const void *src, std::size_t bytes,
                      std::size_t offset = 0);
  Status copyToHost(void *dst, std::size_t bytes,
                    std::size_t offset = 0) const;
  /// Asynchronous copies on `stream`. Host memory must stay valid until the
  /// stream reaches the copy (and should be pinned for true asynchrony).
  Status copyFromHostAsync(const void *src, std::size_t bytes,
                           const Stream &stream, std::size_t offset = 0);
  Status copyToHostAsync(void *dst, std::size_t bytes, const Stream &stream,
                         std::size_t offset = 0) const;
  /// Copies `bytes` from `src` (at srcOffset) into this buffer (at offset).
  Status copyFromDeviceAsync(const DeviceBuffer &src, std::size_t bytes,
                             const Stream &stream, std::size_t srcOffset = 0,
                             std::size_t offset = 0);
  /// Sets `bytes` bytes from `offset` to `value`.
  Status memset8Async(std::uint8_t value, std::size_t bytes,
                      const Stream &stream, std::size_t offset = 0);
  /// Sets `count` 32-bit words from `offset` (a multiple of 4) to `value`.
  Status memsetD32Async(std::uint32_t value, std::size_t count,
                        const Stream &stream, std::size_t offset = 0);

  /// Typed conveniences over whole vectors.
  template <typename T> Status upload(const std::vector<T> &host) {
    static_assert(std::is_trivially_copyable<T>::value, "needs POD data");
    return copyFromHost(host.data(), host.size() * sizeof(T));
  }
  template <typename T> Status download(std::vector<T> &host) const {
    static_assert(std::is_trivially_copyable<T>::value, "needs POD data");
    return copyToHost(host.data(), host.size() * sizeof(T));
  }

private:
  Handle<detail::Allocation, detail::freeAllocation> handle_;
};

/// Function attributes that can be read (cuFuncGetAttribute).
enum class FunctionAttribute {
  MaxThreadsPerBlock,
  StaticSharedBytes,
  LocalBytes,
  Registers,
  PtxVersion,
  BinaryVersion,
  MaxDynamicSharedBytes,
};

/// A kernel in a loaded Module; a non-owning handle, valid while the Module
/// lives.
class Function {
public:
  Function() = default;
  Function(FunctionHandle function, std::string name)
      : function_(function), name_(std::move(name)) {}

  /// Allows launches with up to `bytes` of dynamic shared memory
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); needed above 48 KiB.
  Status setMaxDynamicSharedMemory(int bytes) const;
  /// Reads a function attribute (registers, static shared memory, ...).
  Result<int> attribute(FunctionAttribute attribute) const;

  bool valid() const { return function_ != nullptr; }
  const std::string &name() const { return name_; }
  FunctionHandle raw() const { return function_; }

private:
  FunctionHandle function_ = nullptr;
  std::string name_;
};

/// A device global variable in a Module.
struct DeviceGlobal {
  DevicePtr address = 0;
  std::size_t bytes = 0;
};

/// A loaded module (PTX, cubin or fatbin).
class Module {
public:
  /// JIT-compiles NUL-free PTX text for the current context's device.
  static Result<Module> loadPtx(const std::string &ptx);
  /// Loads a cubin or fatbin image (the driver reads its size from the
  /// ELF/fatbin header; `bytes` is only checked to be non-zero).
  static Result<Module> loadImage(const void *image, std::size_t bytes);

  Result<Function> getFunction(const std::string &name) const;
  Result<DeviceGlobal> getGlobal(const std::string &name) const;
  /// The JIT's informational log (e.g. register/spill notes), maybe empty.
  const std::string &jitInfoLog() const { return infoLog_; }

  bool valid() const { return !handle_.empty(); }
  ModuleHandle raw() const { return handle_.get(); }

private:
  static Result<Module> load(const void *image, const char *what);

  Handle<ModuleHandle, detail::unloadModule> handle_;
  std::string infoLog_;
};

/// Checks a launch configuration against `limits` without calling the driver:
/// every extent >= 1 and within limits, block size <= maxThreadsPerBlock,
/// shared memory <= maxSharedBytesOptin.
Status validateLaunch(Dim3 grid, Dim3 block, unsigned sharedBytes,
                      const LaunchLimits &limits);

/// How launch() launches.
struct LaunchOptions {
  /// Programmatic dependent launch: the kernel itself waits for the grids
  /// before it (griddepcontrol.wait, as the compiler's sm_90 kernels do at
  /// entry), so the driver may start it while the previous kernel drains
  /// (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; kept in graphs
  /// captured from the stream). A kernel that does not wait must not be
  /// launched so. Where the driver lacks cuLaunchKernelEx (before CUDA
  /// 12.0) the launch is a plain one.
  bool programmatic = false;
};

/// Launches `function` on `stream` after validating the configuration
/// against the stream's device (errors name the kernel). `kernelParams`
/// holds one pointer per kernel parameter (see KernelArgs), or is null for a
/// kernel without parameters. The outcome is also recorded, see
/// takeLastLaunchError().
Status launch(const Function &function, Dim3 grid, Dim3 block,
              unsigned sharedBytes, const Stream &stream, void **kernelParams,
              LaunchOptions options = {});

/// The most recent failed launch() on this thread since the last call, then
/// cleared; success if none failed (like cudaGetLastError, but covering only
/// launch()). This is the layer's one piece of mutable state outside the
/// Driver cache, and it is thread-local.
Status takeLastLaunchError();

/// Owns kernel arguments and the void** array cuLaunchKernel reads. Each
/// value is copied into an owned buffer at its natural alignment.
///
///   KernelArgs args;
///   args.ptr(x).ptr(y).i32(n).f32(alpha);
///   launch(fn, grid, block, 0, stream, args.data());
class KernelArgs {
public:
  KernelArgs() = default;
  KernelArgs(KernelArgs &&) = default;
  KernelArgs &operator=(KernelArgs &&) = default;
  // Copying would leave data() pointing into the source.
  KernelArgs(const KernelArgs &) = delete;
  KernelArgs &operator=(const KernelArgs &) = delete;

  KernelArgs &ptr(DevicePtr address) { return value(address); }
  KernelArgs &ptr(const DeviceBuffer &buffer) {
    return value(buffer.address());
  }
  KernelArgs &i32(std::int32_t v) { return value(v); }
  KernelArgs &u32(std::uint32_t v) { return value(v); }
  KernelArgs &i64(std::int64_t v) { return value(v); }
  KernelArgs &u64(std::uint64_t v) { return value(v); }
  KernelArgs &f32(float v) { return value(v); }
  KernelArgs &f64(double v) { return value(v); }

  /// Any trivially copyable value (e.g. a by-value struct parameter) up to
  /// 16-byte alignment.
  template <typename T> KernelArgs &value(const T &v) {
    static_assert(std::is_trivially_copyable<T>::value,
                  "kernel arguments are copied bytewise");
    static_assert(alignof(T) <= kMaxAlign, "over-aligned kernel argument");
    append(&v, sizeof(T), alignof(T));
    return *this;
  }

  /// The parameter array for cuLaunchKernel; valid until the next append,
  /// move or destruction.
  void **data();
  std::size_t size() const { return offsets_.size(); }
  /// The bytes of argument `i` (for tests and diagnostics).
  const void *argument(std::size_t i) const;

private:
  static constexpr std::size_t kMaxAlign = 16;
  struct alignas(kMaxAlign) Chunk {
    unsigned char bytes[kMaxAlign];
  };
  void append(const void *bytes, std::size_t size, std::size_t align);

  std::vector<Chunk> storage_;
  std::size_t used_ = 0;
  std::vector<std::size_t> offsets_;
  std::vector<void *> pointers_;
};

/// How stream capture treats potentially unsafe API calls made meanwhile by
/// other threads (see cuStreamBeginCapture).
enum class CaptureMode { Global, ThreadLocal, Relaxed };

/// A captured (not yet executable) CUDA graph.
class Graph {
public:
  Graph() = default;

  /// Makes an executable graph (cuGraphInstantiateWithFlags, flags 0).
  Result<GraphExec> instantiate() const;

  bool valid() const { return !handle_.empty(); }
  GraphHandle raw() const { return handle_.get(); }

private:
  friend class StreamCapture;
  explicit Graph(GraphHandle graph) : handle_(graph) {}

  Handle<GraphHandle, detail::destroyGraph> handle_;
};

/// An instantiated graph.
class GraphExec {
public:
  GraphExec() = default;

  /// Enqueues one replay on `stream`.
  Status launch(const Stream &stream) const;
  /// Uploads the graph's resources ahead of the first launch.
  Status upload(const Stream &stream) const;
  /// Updates parameters in place from a graph of the same topology (e.g. a
  /// re-capture with new kernel arguments); on failure the message names
  /// the CUgraphExecUpdateResult and the caller should re-instantiate.
  Status update(const Graph &graph);

  bool valid() const { return !handle_.empty(); }
  GraphExecHandle raw() const { return handle_.get(); }

private:
  friend class Graph;
  Handle<GraphExecHandle, detail::destroyGraphExec> handle_;
};

/// Stream capture as a scope: begin() starts capturing, end() returns the
/// graph. If the scope is destroyed while still capturing (an early error
/// return), capture is ended and the partial graph discarded, so the stream
/// is usable again.
class StreamCapture {
public:
  static Result<StreamCapture> begin(const Stream &stream,
                                     CaptureMode mode = CaptureMode::ThreadLocal);

  /// Ends capture and returns the graph (fails if capture was invalidated,
  /// e.g. by a synchronising call on the stream).
  Result<Graph> end();
  bool active() const { return !handle_.empty(); }

private:
  Handle<StreamHandle, detail::abandonCapture> handle_;
};

} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_CUDA_DRIVER_H
