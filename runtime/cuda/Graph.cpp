//===- Graph.cpp - Stream capture, graphs and executable graphs -----------===//
//
// Implements StreamCapture (a capture scope that ends itself on early
// return), Graph (instantiation) and GraphExec (launch, upload, in-place
// update).
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {
const char *updateResultName(CUgraphExecUpdateResult result) {
  switch (result) {
    CONDENSATE_CUDA_GRAPH_EXEC_UPDATE_RESULTS(CONDENSATE_CUDA_NAME_CASE)
  }
  return "unknown CUgraphExecUpdateResult";
}

CUstreamCaptureMode toDriver(CaptureMode mode) {
  switch (mode) {
  case CaptureMode::Global:
    return CU_STREAM_CAPTURE_MODE_GLOBAL;
  case CaptureMode::ThreadLocal:
    return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  case CaptureMode::Relaxed:
    return CU_STREAM_CAPTURE_MODE_RELAXED;
  }
  return CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
}
} // namespace

//===----------------------------------------------------------------------===//
// Graph and GraphExec
//===----------------------------------------------------------------------===//

void detail::destroyGraph(GraphHandle raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuGraphDestroy(raw);
}

void detail::destroyGraphExec(GraphExecHandle raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuGraphExecDestroy(raw);
}

Result<GraphExec> Graph::instantiate() const {
  if (!valid())
    return Status::error("Graph::instantiate: empty graph");
  GraphExec exec;
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(LoadedDriver::loaded(),
                                           cuGraphInstantiateWithFlags,
                                           exec.handle_.out(), raw(), 0));
  return exec;
}

Status GraphExec::launch(const Stream &stream) const {
  if (!valid() || !stream.valid())
    return Status::error("GraphExec::launch: empty graph or stream");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuGraphLaunch, raw(),
                       stream.raw());
}

Status GraphExec::upload(const Stream &stream) const {
  if (!valid() || !stream.valid())
    return Status::error("GraphExec::upload: empty graph or stream");
  return CONDENSATE_CU(LoadedDriver::loaded(), cuGraphUpload, raw(),
                       stream.raw());
}

Status GraphExec::update(const Graph &graph) {
  if (!valid() || !graph.valid())
    return Status::error("GraphExec::update: empty graph");
  const LoadedDriver &d = LoadedDriver::loaded();
  if (!d.api().cuGraphExecUpdate_v2)
    return Status::error("GraphExec::update: the driver lacks "
                         "cuGraphExecUpdate_v2 (CUDA 12.0+)");
  CUgraphExecUpdateResultInfo info = {};
  CUresult r = d.api().cuGraphExecUpdate_v2(raw(), graph.raw(), &info);
  return d.check(r, "cuGraphExecUpdate_v2",
                 std::string("update result ") + updateResultName(info.result));
}

//===----------------------------------------------------------------------===//
// StreamCapture
//===----------------------------------------------------------------------===//

void detail::abandonCapture(StreamHandle raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded()) {
    CUgraph graph = nullptr;
    (void)d->api().cuStreamEndCapture(raw, &graph);
    if (graph)
      (void)d->api().cuGraphDestroy(graph);
  }
}

Result<StreamCapture> StreamCapture::begin(const Stream &stream,
                                           CaptureMode mode) {
  if (!stream.valid())
    return Status::error("StreamCapture::begin: empty stream");
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  CONDENSATE_RETURN_IF_ERROR(CONDENSATE_CU(**driver, cuStreamBeginCapture_v2,
                                           stream.raw(), toDriver(mode)));
  StreamCapture capture;
  capture.handle_.reset(stream.raw());
  return capture;
}

Result<Graph> StreamCapture::end() {
  if (!active())
    return Status::error("StreamCapture::end: not capturing");
  const LoadedDriver &d = LoadedDriver::loaded();
  CUgraph raw = nullptr;
  CUresult r = d.api().cuStreamEndCapture(handle_.release(), &raw);
  Graph graph(raw); // owns (and on failure destroys) whatever was returned
  CONDENSATE_RETURN_IF_ERROR(d.check(r, "cuStreamEndCapture"));
  if (!graph.valid())
    return Status::error("cuStreamEndCapture returned no graph");
  return graph;
}

} // namespace cuda
} // namespace condensate
