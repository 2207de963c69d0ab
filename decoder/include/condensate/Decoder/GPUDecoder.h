//===- GPUDecoder.h - The Llama decoder on an NVIDIA GPU --------*- C++ -*-===//
//
// The reference decoder's GPU path: weights on the device (float32),
// projections and MLP through cuBLAS, the non-attention element-wise work
// through kernels compiled from DecoderKernels.mlir by the same NVVM
// lowering, and attention plus KV append through the generated condensate
// kernels (GPUProgram). One decode step is captured once into a CUDA graph
// and replayed for every token: its inputs (token, position, windows) live
// in device memory that the host updates before each replay.
//
// Prefill is dense, as on the CPU: each prompt chunk is one batched call of
// the generated dense attention with one "sequence" per prompt position
// (its own length, the shared page table), so prefill is causal.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_GPUDECODER_H
#define CONDENSATE_DECODER_GPUDECODER_H

#include "condensate/Decoder/Llama.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace condensate::decoder {

struct GPUDecoderOptions {
  KVType kvType = KVType::BF16;
  /// KV page size; 0 takes the schedule's (64 if all dense).
  int64_t pageSize = 0;
  /// KV capacity in tokens of the one sequence (0: the model's context).
  int64_t maxTokens = 0;
  /// Prompt positions per prefill chunk.
  int64_t prefillChunk = 256;
  int64_t repetitionSpan = 64;
  std::string chip = "sm_90";
  /// Replay decode steps from a captured CUDA graph (else launch eagerly).
  bool cudaGraph = true;
  int device = 0;
};

/// Wall times of the last prefill and the decode steps since create/reset.
struct GPUTimings {
  double prefillSeconds = 0.0;
  int64_t prefillTokens = 0;
  double decodeSeconds = 0.0;
  int64_t decodeSteps = 0;
  double compileSeconds = 0.0; ///< attention and element-wise kernels
};

/// Decodes one sequence on the GPU.
class GPUDecoder {
public:
  static Result<std::unique_ptr<GPUDecoder>>
  create(std::shared_ptr<const LlamaWeights> weights, const Schedule &schedule,
         const GPUDecoderOptions &options = {});
  ~GPUDecoder();
  GPUDecoder(const GPUDecoder &) = delete;
  GPUDecoder &operator=(const GPUDecoder &) = delete;

  /// Forgets the sequence (the cache is reused).
  void reset();
  /// Tokens fed so far.
  int64_t length() const;

  /// Feeds the prompt densely; next-token logits of its last position to
  /// `lastLogits` ([vocab], may be null).
  Status prefill(const int32_t *tokens, int64_t count, float *lastLogits,
                 const std::function<void(int64_t, int64_t)> &progress = {});
  /// One decode step under the schedule: appends `token`, logits [vocab].
  Status step(int32_t token, float *logits);
  /// Attention statistics of the last step, [numLayers, Hq, 4].
  const std::vector<float> &stats() const;
  const GPUTimings &timings() const;
  void resetTimings();
  /// "NVIDIA H200 (sm_90, 132 SMs)".
  std::string deviceDescription() const;

  struct Impl;

private:
  explicit GPUDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_GPUDECODER_H
