//===- Capture.h - condensate-decode --capture-kv --------------*- C++ -*-===//
//
// Writes what one decode step's attention saw on a real model: the queries
// of the step and the keys and values of the cache, for benchmarks that
// time attention on real KV instead of random keys (bench/bench_cold.py
// --kv DIR).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TOOLS_DECODE_CAPTURE_H
#define CONDENSATE_TOOLS_DECODE_CAPTURE_H

#include "condensate/Decoder/Decoder.h"
#include "condensate/Decoder/Model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace condensate::tools {

struct CaptureRequest {
  std::string dir;             ///< output folder (created)
  std::string layers;          ///< comma-separated layer indices; "" all
  std::string modelPath;       ///< recorded in capture.json
  KVType kvType = KVType::F32; ///< the cache's element type, as written
  int threads = 0;
};

/// Prefills every token of `prompt` but the last with dense attention,
/// decodes the last one (one dense step) and writes to request.dir:
///   q.npy        float32 [layers, q_heads, head_dim], the step's queries
///                (after RoPE and any QK-norm);
///   k.npy, v.npy [layers, kv_heads, n, head_dim] of the cache's type
///                (float32 '<f4', float16 '<f2', bfloat16 as '<u2'), the
///                n = prompt length positions that step attended, in
///                sequence order;
///   capture.json the shapes, layers, kv type, softmax scale, model and
///                prompt ids.
/// Returns a one-line summary; fails (tools::fail) on bad layers or I/O.
std::string captureKV(std::shared_ptr<const decoder::ModelWeights> weights,
                      const std::vector<int32_t> &prompt,
                      const CaptureRequest &request);

} // namespace condensate::tools

#endif // CONDENSATE_TOOLS_DECODE_CAPTURE_H
