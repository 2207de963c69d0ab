//===- Decoder.h - The reference decoder: one API, a CPU or a GPU backend -===//
//
// Choosing the backend: DecoderOptions::backend, at create(). BackendKind::CPU
// runs projections and the MLP through OpenBLAS and attention through the
// JIT-compiled condensate kernels (CPUProgram); BackendKind::GPU keeps the
// weights on the device (float32, or its matrices in bfloat16:
// DecoderOptions::weightType), runs projections through cuBLAS, the
// element-wise work through kernels compiled from DecoderKernels.mlir and
// attention plus KV append through the generated condensate kernels
// (GPUProgram), and replays each decode step from a CUDA graph captured per
// batch size. Everything below is the same for both: the layer recipe is
// written once over the backend, and one page allocator keeps every
// sequence's page-table row, whatever memory the pages live in.
//
// Prefill is dense: a prompt's causal self-attention is computed in chunks
// of query rows, whatever the schedule says. The policy applies from the
// first decode step on, i.e. to every generated token (and to every token
// fed by teacherForce). Keys and values of the prompt still go through the
// append kernel, and prefill attention reads them back from the cache, so
// prefill sees the same (possibly f16/bf16-rounded) keys as decoding.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_DECODER_H
#define CONDENSATE_DECODER_DECODER_H

#include "condensate/Decoder/Model.h"
#include "condensate/Runtime/Attention.h"
#include "condensate/Runtime/Policy.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace condensate::decoder {

/// Where a decoder runs.
enum class BackendKind { CPU, GPU };

/// The element type the GPU holds its weight matrices in (the projections,
/// the MLP and the logits' matrix); norms, biases, RoPE tables and the
/// embedding table its lookup reads stay float32.
enum class WeightType { F32, BF16 };
/// "f32", "bf16".
const char *weightTypeName(WeightType t);
/// The inverse of weightTypeName; an error names the accepted values.
Result<WeightType> parseWeightType(const std::string &name);

struct DecoderOptions {
  BackendKind backend = BackendKind::CPU;
  KVType kvType = KVType::F32;
  /// KV page size in tokens; 0 takes the schedule's (if all dense: 16 on
  /// the CPU, 64 on the GPU). A non-zero value that differs from the
  /// schedule's is an error; use withPageSize() to re-page a schedule.
  int64_t pageSize = 0;
  /// Bits of the key sketches the cache's summaries carry; 0 takes the
  /// schedule's. Programs compiled later for other schedules must use the
  /// same (a decoder meant to run sketch policies of several schedules
  /// sets it).
  int64_t sketchBits = 0;
  /// KV pool capacity in tokens, over all sequences; 0 means the model's
  /// context length (4096 if unknown).
  int64_t maxTokens = 0;
  /// Query rows per prefill chunk; 0: 256 on the CPU, 2048 on a GPU.
  int64_t prefillChunk = 0;
  /// Prefill attends to at most this many recent positions on every layer
  /// (0: the model's own attention). Only for speed runs on dummy weights
  /// (ModelWeights::dummy), whose cache values mean nothing anyway: a long
  /// prompt then fills the cache in time linear in its length.
  int64_t prefillWindow = 0;
  /// Tokens the repetition score of adaptive layers looks back over.
  int64_t repetitionSpan = 64;
  /// Fallback memory: a layer whose heads are all dense or certified and
  /// whose certified step read at least the bytes dense attention would
  /// (bytesRead(), over the batch) runs dense attention for the next
  /// `fallbackMemory` decode steps, then is tried again; 0 runs every
  /// step's certificate. Exact either way (dense is what a fallback
  /// computes); it only stops paying for scoring and the certificate where
  /// they keep failing. Layers are tried together (every fallbackMemory + 1
  /// steps of a program), so a captured GPU step has at most two layer
  /// plans. stats() marks such heads abi::kRanDense.
  int64_t fallbackMemory = 0;

  // CPU backend.
  /// OpenBLAS threads (openblas_set_num_threads, process-wide); 0 leaves
  /// OpenBLAS's own choice.
  int threads = 0;

  // GPU backend.
  /// F32: every product in float32 (cuBLAS SGEMM). BF16: the matrices
  /// rounded to bfloat16 once, at upload (half the bytes a step reads), and
  /// each product's input rows rounded to bfloat16 on the device, with
  /// float32 accumulation and output. The CPU backend takes only F32 (it
  /// holds ModelWeights as loaded, WeightStorage).
  WeightType weightType = WeightType::F32;
  std::string chip = "sm_90";
  int device = 0;
  /// Replay decode steps from captured CUDA graphs (else launch eagerly).
  bool cudaGraph = true;
  /// Most sequences one step() may carry: the GPU sizes its activations
  /// and attention workspace for max(maxBatch, prefillChunk) rows.
  int64_t maxBatch = 64;
  /// (batch, context) pairs to tune a schedule's GPU kernels for before
  /// compiling it, when the kernel cache has no tuning record for it yet
  /// (docs/TUNING.md; the record is stored for later runs). Empty: build
  /// what the cache holds (a record's knobs, else the defaults).
  std::vector<std::pair<int64_t, int64_t>> tuneFor;
};

/// Wall time spent in the parts of decode steps (or prefills), summed since
/// the last resetProfile(): where the time goes. The GPU backend queues its
/// work asynchronously, so it fills only `steps` and `total`.
struct StepProfile {
  int64_t steps = 0;      ///< decode steps, or prompt tokens for prefill
  double norms = 0.0;     ///< RMSNorm, RoPE, SwiGLU and copies
  double qkv = 0.0;       ///< fused q/k/v projection
  double append = 0.0;    ///< compiled append kernel
  double attention = 0.0; ///< compiled kernel (prefill: dense, + gather)
  double output = 0.0;    ///< attention output projection
  double mlp = 0.0;       ///< gate/up and down projections
  double logits = 0.0;    ///< final norm and vocabulary projection
  double total = 0.0;
};

/// The weights as a decoder's backend holds them.
struct WeightFootprint {
  /// Every weight the backend keeps: on the GPU, in device memory (with
  /// WeightType::BF16 and a tied output, both the float32 embedding table
  /// of the lookup and its bfloat16 copy for the logits); on the CPU,
  /// ModelWeights::bytes().
  int64_t heldBytes = 0;
  /// What one decode step reads of them: every matrix, norm and bias once,
  /// of the embedding table only the batch's rows (not counted) unless it
  /// is itself the logits' matrix.
  int64_t stepBytes = 0;
};

/// Called during prefill with (tokens done, tokens in all), monotonically.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

/// The BLAS library the CPU backend uses: "OpenBLAS <config>; core
/// <kernel>; <n> threads".
std::string blasDescription();
/// OpenBLAS picks its kernels once, when it is loaded, from the CPU model;
/// a CPU newer than the library (OpenBLAS 0.3.21 on an Emerald Rapids
/// Xeon, for one) gets the generic SSE3 "Prescott" kernels, two to three
/// times slower. Returns the OPENBLAS_CORETYPE value (SkylakeX, Haswell)
/// that suits this CPU when that happened, else "". Only a new process can
/// act on it (set the variable and re-execute).
std::string blasCoreRecommendation();

/// Page size of the non-dense policies of `schedule`: 0 if every policy is
/// dense, an error if they disagree.
Result<int64_t> schedulePageSize(const Schedule &schedule);
/// `schedule` with every non-dense policy's page_size set to `pageSize`.
Schedule withPageSize(Schedule schedule, int64_t pageSize);
/// `schedule` as a model of `config` runs it: its local (sliding-window)
/// layers keep the model's own attention, the window policy (anchor 0,
/// window ModelConfig::slidingWindow, pages of `pageSize`), whatever the
/// schedule says of them; its global layers take the schedule's policies.
/// A model without local layers gets `schedule` unchanged. The decoder
/// applies it to every schedule it compiles (the dense one too).
Schedule withModelRoles(const ModelConfig &config, Schedule schedule,
                        int64_t pageSize);

/// The schedule whose prefill functions (condensate.prefill_attention) the
/// decoder runs on prompt rows: the model's own attention, dense on global
/// layers and windowed on local ones (withModelRoles of a dense schedule);
/// with `prefillWindow` > 0 (DecoderOptions::prefillWindow), a window of
/// that many positions on every other layer.
Schedule prefillSchedule(const ModelConfig &config, int64_t prefillWindow,
                         int64_t pageSize);

/// The window (AttentionArgs::windows entry) that layer `layer`'s kernels
/// get for a sequence whose repetition score is `repScore`: windowFor of
/// the layer's first adaptive key/value-head policy, 0 when no head of the
/// layer is adaptive (the kernels read windows only for adaptive heads).
/// Each head clamps it to its own [window, window_max]. The decoder's rule;
/// a study re-running a layer's attention should use it too.
int32_t layerWindow(const Schedule &schedule, int64_t layer, int64_t kvHeads,
                    double repScore);

/// A schedule's attention kernels compiled for one decoder (its backend,
/// shape and page size): from Decoder::compile, for Decoder::setProgram.
class AttentionProgram {
public:
  virtual ~AttentionProgram() = default;
  virtual const Schedule &schedule() const = 0;
  /// Wall time the compile (or cache look-up and load) took.
  virtual double compileSeconds() const = 0;
  /// The GPU kernels' knobs when a tuning record chose them (as
  /// condensate-to-ptx options), else "".
  virtual std::string tuning() const { return ""; }
};

class Decoder {
public:
  using SeqId = int64_t;
  /// Entries per (layer, sequence, query head) in stats(): eps_hat,
  /// positions attended, extra units, dense fallback, output-error bound
  /// (see AttentionStat in Engine.h).
  static constexpr int64_t kStatFields = kAttentionStatsWidth;

  /// Compiles `schedule` for the model's attention shape on the backend
  /// options.backend names and allocates the KV pool there.
  static Result<std::unique_ptr<Decoder>>
  create(std::shared_ptr<const ModelWeights> weights, const Schedule &schedule,
         const DecoderOptions &options = {});
  ~Decoder();
  Decoder(const Decoder &) = delete;
  Decoder &operator=(const Decoder &) = delete;

  const ModelConfig &config() const;
  const ModelShape &shape() const;
  const DecoderOptions &options() const;
  /// "OpenBLAS ...; 2 threads" or "NVIDIA H200 (sm_90, 132 SMs), weights
  /// bf16".
  std::string deviceDescription() const;
  const WeightFootprint &weightFootprint() const;
  /// The GPU's memory in use now (weights, the page pool, workspaces and
  /// every other user of the device), e.g. "12.3 GB of 143.8 GB in use";
  /// empty on the CPU.
  std::string memoryUse() const;
  /// Wall time create() spent compiling (or loading) kernels.
  double compileSeconds() const;

  // Attention programs ------------------------------------------------------

  /// The program later decode steps use (create()'s schedule at first).
  std::shared_ptr<const AttentionProgram> program() const;
  const Schedule &schedule() const;
  /// Compiles another schedule for this decoder (same page size).
  Result<std::shared_ptr<const AttentionProgram>>
  compile(const Schedule &schedule) const;
  /// Switches the attention program of later decode steps; the KV cache is
  /// kept. The program must come from this decoder's compile() (or
  /// program()).
  Status setProgram(std::shared_ptr<const AttentionProgram> program);

  // Sequences ---------------------------------------------------------------

  /// A new, empty sequence.
  SeqId newSequence();
  /// A new sequence holding `seq`'s tokens and cache: full pages are shared
  /// (appends never write them), the partial last page is copied; with
  /// `shareFullPages` false every page is copied (a batch of distinct
  /// caches, as a speed run needs: shared pages would sit in L2 once for
  /// all the batch).
  Result<SeqId> fork(SeqId seq, bool shareFullPages = true);
  /// Frees the sequence's pages (shared ones when their last user goes).
  Status release(SeqId seq);
  /// Tokens fed to `seq` so far (its context length); -1 if not live.
  int64_t length(SeqId seq) const;
  const std::vector<int32_t> &tokens(SeqId seq) const;
  int64_t freePages() const;
  int64_t totalPages() const;
  /// The cache pages of `seq` in position order (its page-table row);
  /// empty if the sequence is not live.
  const std::vector<int32_t> &pages(SeqId seq) const;

  /// One layer's KV pool as the kernels see it, in host memory (read-only):
  /// k/v [totalPages, Hkv, P, D] of the KV type, summaries
  /// [totalPages, Hkv, 5, D] f32. The CPU backend's pool itself (valid
  /// until the decoder is destroyed); on the GPU a copy taken by this call
  /// (valid until the next cache() call). For tests and studies that
  /// inspect real keys and values; pair it with pages() and lastQueries().
  struct CacheView {
    const void *k = nullptr;
    const void *v = nullptr;
    const float *summaries = nullptr;
    int64_t numPages = 0;
  };
  CacheView cache(int64_t layer) const;

  // Forward passes ----------------------------------------------------------
  //
  // Arguments (sequences, token ids, cache capacity, context length) are
  // checked before anything changes; an error from a kernel after that
  // leaves the sequences involved unusable (release them).

  /// Feeds `count` tokens to `seq` with dense causal attention. Writes the
  /// next-token logits of the last position to `lastLogits` ([vocab], may
  /// be null) and, when `allLogits` is non-null, those of every position
  /// ([count, vocab], resized).
  Status prefill(SeqId seq, const int32_t *tokens, int64_t count,
                 float *lastLogits, std::vector<float> *allLogits = nullptr,
                 const ProgressFn &progress = {});
  /// One decode step: tokens[i] is appended to seqs[i] and attended under
  /// the program's policies. logits: [batch, vocab] (may be null). Adaptive
  /// layers get a per-sequence window from the repetition score of the
  /// sequence's last repetitionSpan tokens (including tokens[i]), through
  /// layerWindow().
  Status step(const SeqId *seqs, const int32_t *tokens, int64_t batch,
              float *logits);
  Status step(SeqId seq, int32_t token, float *logits) {
    return step(&seq, &token, 1, logits);
  }
  /// Attention statistics of the last step, [numLayers, batch, Hq, 5].
  const std::vector<float> &stats() const;
  /// Queries (after RoPE) each layer's attention received in the last
  /// step, [numLayers, batch, Hq, D]: with cache() and pages(), enough to
  /// re-run a layer's attention on real KV under another policy.
  const std::vector<float> &lastQueries() const;
  /// Context length each sequence of the last step attended over, [batch].
  const int32_t *lastLens() const;
  const StepProfile &profile() const;
  const StepProfile &prefillProfile() const;
  void resetProfile();

  /// Feeds `count` tokens one decode step at a time (the policy applies at
  /// each): logits [count, vocab] of every step, and with `stats` the
  /// per-step statistics [count, numLayers, Hq, 5].
  Status teacherForce(SeqId seq, const int32_t *tokens, int64_t count,
                      std::vector<float> &logits,
                      std::vector<float> *stats = nullptr);

  struct Impl;

private:
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_DECODER_H
