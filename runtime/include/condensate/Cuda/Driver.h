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
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CUDA_DRIVER_H
#define CONDENSATE_CUDA_DRIVER_H

#include "condensate/Cuda/DriverAbi.h"
#include "condensate/Runtime/Status.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace condensate {
namespace cuda {

/// A device address (CUdeviceptr).
using DevicePtr = abi::CUdeviceptr;

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
/// It holds only immutable data after initialisation.
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
  /// The CUdevice for a valid ordinal, and back (-1 if unknown).
  abi::CUdevice handle(int ordinal) const {
    assert(ordinal >= 0 && ordinal < deviceCount() && "bad device ordinal");
    return handles_[static_cast<std::size_t>(ordinal)];
  }
  int ordinalOf(abi::CUdevice dev) const;
  /// cuDriverGetVersion, e.g. 13000 for CUDA 13.0.
  int driverVersion() const { return driverVersion_; }
  /// The raw entry points, for calls this layer does not wrap.
  const abi::DriverApi &api() const { return api_; }

  /// Status for a driver result: success, or
  /// "<call> failed: NAME (text)[; <detail>]".
  Status check(abi::CUresult result, const char *call,
               const std::string &detail = std::string()) const;
  /// "CUDA_ERROR_NAME (text)" for a result code.
  std::string describe(abi::CUresult result) const;

  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

private:
  Driver() = default;
  friend struct DriverLoader;

  void *library_ = nullptr;
  abi::DriverApi api_;
  int driverVersion_ = 0;
  std::vector<DeviceProperties> devices_;
  std::vector<abi::CUdevice> handles_;
};

class Event;

/// A retained primary context, current on the thread that created it.
class Context {
public:
  /// Retains device `ordinal`'s primary context and makes it current.
  static Result<Context> primary(int ordinal = 0);

  Context() = default;
  Context(Context &&other) noexcept;
  Context &operator=(Context &&other) noexcept;
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;
  /// Releases the primary context (it is destroyed when its last user,
  /// including the CUDA runtime, releases it).
  ~Context();

  /// Makes this context current on the calling thread (needed once per
  /// thread that issues work).
  Status makeCurrent() const;
  /// Makes the context current on this thread, then waits for all its work.
  Status synchronize() const;
  /// Makes the context current on this thread, then returns (free, total)
  /// device memory in bytes.
  Result<std::pair<std::size_t, std::size_t>> memoryInfo() const;

  bool valid() const { return context_ != nullptr; }
  int device() const { return device_; }
  const DeviceProperties &properties() const;
  abi::CUcontext raw() const { return context_; }

private:
  void reset();

  abi::CUcontext context_ = nullptr;
  int device_ = -1;
};

/// A non-blocking stream (does not synchronise with stream 0).
class Stream {
public:
  /// Creates a stream in the current context.
  static Result<Stream> create();
  /// Wraps a stream someone else owns (e.g. a framework's current stream,
  /// possibly the legacy default stream 0) without taking ownership.
  static Stream borrow(abi::CUstream raw, int device);

  Stream() = default;
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  Status synchronize() const;
  /// True if all work has completed, false if some is pending.
  Result<bool> query() const;
  /// Makes future work on this stream wait for `event`.
  Status wait(const Event &event) const;
  /// True while the stream is capturing into a graph.
  Result<bool> isCapturing() const;

  bool valid() const { return stream_ != nullptr || borrowed_; }
  /// Device ordinal of the context the stream was created in.
  int device() const { return device_; }
  /// Also usable as a runtime-API cudaStream_t.
  abi::CUstream raw() const { return stream_; }

private:
  void reset();

  abi::CUstream stream_ = nullptr;
  int device_ = -1;
  bool borrowed_ = false;
};

/// A CUDA event, by default with timing enabled.
class Event {
public:
  static Result<Event> create(bool enableTiming = true);

  Event() = default;
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  Status record(const Stream &stream) const;
  Status synchronize() const;
  /// True if the recorded work has completed.
  Result<bool> query() const;
  /// Milliseconds between two recorded, completed timing events.
  static Result<float> elapsedMs(const Event &start, const Event &end);

  bool valid() const { return event_ != nullptr; }
  abi::CUevent raw() const { return event_; }

private:
  void reset();

  abi::CUevent event_ = nullptr;
};

/// Device memory from cuMemAlloc. Size 0 is allowed (null address, all copies
/// of 0 bytes succeed). Offsets and sizes are in bytes and bounds-checked.
class DeviceBuffer {
public:
  static Result<DeviceBuffer> allocate(std::size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  DevicePtr address() const { return address_; }
  std::size_t size() const { return bytes_; }

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
  void reset();
  Status checkRange(const char *op, std::size_t offset,
                    std::size_t bytes) const;

  DevicePtr address_ = 0;
  std::size_t bytes_ = 0;
};

/// A kernel in a loaded Module; a non-owning handle, valid while the Module
/// lives.
class Function {
public:
  Function() = default;
  Function(abi::CUfunction function, std::string name)
      : function_(function), name_(std::move(name)) {}

  /// Allows launches with up to `bytes` of dynamic shared memory
  /// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); needed above 48 KiB.
  Status setMaxDynamicSharedMemory(int bytes) const;
  /// Reads a function attribute (registers, static shared memory, ...).
  Result<int> attribute(abi::CUfunction_attribute attribute) const;

  bool valid() const { return function_ != nullptr; }
  const std::string &name() const { return name_; }
  abi::CUfunction raw() const { return function_; }

private:
  abi::CUfunction function_ = nullptr;
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

  Module() = default;
  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  Result<Function> getFunction(const std::string &name) const;
  Result<DeviceGlobal> getGlobal(const std::string &name) const;
  /// The JIT's informational log (e.g. register/spill notes), maybe empty.
  const std::string &jitInfoLog() const { return infoLog_; }

  bool valid() const { return module_ != nullptr; }
  abi::CUmodule raw() const { return module_; }

private:
  static Result<Module> load(const void *image, const char *what);
  void reset();

  abi::CUmodule module_ = nullptr;
  std::string infoLog_;
};

/// Checks a launch configuration against `limits` without calling the driver:
/// every extent >= 1 and within limits, block size <= maxThreadsPerBlock,
/// shared memory <= maxSharedBytesOptin.
Status validateLaunch(Dim3 grid, Dim3 block, unsigned sharedBytes,
                      const LaunchLimits &limits);

/// Launches `function` on `stream` after validating the configuration
/// against the stream's device (errors name the kernel). `kernelParams`
/// holds one pointer per kernel parameter (see KernelArgs), or is null for a
/// kernel without parameters. The outcome is also recorded, see
/// takeLastLaunchError().
Status launch(const Function &function, Dim3 grid, Dim3 block,
              unsigned sharedBytes, const Stream &stream, void **kernelParams);

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

class GraphExec;

/// A captured (not yet executable) CUDA graph.
class Graph {
public:
  Graph() = default;
  Graph(Graph &&other) noexcept;
  Graph &operator=(Graph &&other) noexcept;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  /// Makes an executable graph (cuGraphInstantiateWithFlags, flags 0).
  Result<GraphExec> instantiate() const;

  bool valid() const { return graph_ != nullptr; }
  abi::CUgraph raw() const { return graph_; }

private:
  friend class StreamCapture;
  explicit Graph(abi::CUgraph graph) : graph_(graph) {}
  void reset();

  abi::CUgraph graph_ = nullptr;
};

/// An instantiated graph.
class GraphExec {
public:
  GraphExec() = default;
  GraphExec(GraphExec &&other) noexcept;
  GraphExec &operator=(GraphExec &&other) noexcept;
  GraphExec(const GraphExec &) = delete;
  GraphExec &operator=(const GraphExec &) = delete;
  ~GraphExec();

  /// Enqueues one replay on `stream`.
  Status launch(const Stream &stream) const;
  /// Uploads the graph's resources ahead of the first launch.
  Status upload(const Stream &stream) const;
  /// Updates parameters in place from a graph of the same topology (e.g. a
  /// re-capture with new kernel arguments); on failure the message names
  /// the CUgraphExecUpdateResult and the caller should re-instantiate.
  Status update(const Graph &graph);

  bool valid() const { return exec_ != nullptr; }
  abi::CUgraphExec raw() const { return exec_; }

private:
  friend class Graph;
  explicit GraphExec(abi::CUgraphExec exec) : exec_(exec) {}
  void reset();

  abi::CUgraphExec exec_ = nullptr;
};

/// Stream capture as a scope: begin() starts capturing, end() returns the
/// graph. If the scope is destroyed while still capturing (an early error
/// return), capture is ended and the partial graph discarded, so the stream
/// is usable again.
class StreamCapture {
public:
  static Result<StreamCapture> begin(const Stream &stream,
                                     CaptureMode mode = CaptureMode::ThreadLocal);

  StreamCapture() = default;
  StreamCapture(StreamCapture &&other) noexcept;
  StreamCapture &operator=(StreamCapture &&other) noexcept;
  StreamCapture(const StreamCapture &) = delete;
  StreamCapture &operator=(const StreamCapture &) = delete;
  ~StreamCapture();

  /// Ends capture and returns the graph (fails if capture was invalidated,
  /// e.g. by a synchronising call on the stream).
  Result<Graph> end();
  bool active() const { return stream_ != nullptr; }

private:
  void abandon();

  abi::CUstream stream_ = nullptr;
};

} // namespace cuda
} // namespace condensate

#endif // CONDENSATE_CUDA_DRIVER_H
