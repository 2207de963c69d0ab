//===- Policy.h - policies and schedules for the runtime API ----*- C++ -*-===//
//
// Plain C++ descriptions of a condensate policy, a layer schedule and a
// model's attention shape, mirroring the dialect's #condensate.policy and
// #condensate.schedule. The runtime reads and writes them as JSON (one form,
// PolicyJSON.cpp) and renders them as MLIR attribute text; reading MLIR text
// needs the compiler (condensate/Compiler/Compiler.h).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_POLICY_H
#define CONDENSATE_RUNTIME_POLICY_H

#include "condensate/ABI/AttentionABI.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace condensate {

enum class Selector { Exact, BlockMinMax, BlockMean, Sketch };
enum class KVType { F32, F16, BF16 };

const char *selectorName(Selector s);
const char *kvTypeName(KVType t);
/// Bytes per stored key/value element.
int kvTypeBytes(KVType t);

/// One layer's (or key/value head's) policy. `dense` ignores the rest.
struct Policy {
  bool dense = false;
  int64_t anchor = 1;
  int64_t window = 0;
  int64_t windowMax = 0; ///< == window for a fixed window
  int64_t topk = 0;
  Selector selector = Selector::BlockMinMax;
  int64_t pageSize = 16;
  double tau = 0.0;
  int64_t maxExtra = 0;
  /// Bits of the key sketch (selector Sketch only: 2, 4 or 8; 0 otherwise).
  int64_t sketchBits = 0;
  /// Whether a certified policy also bounds the output error (stats column
  /// 4), which reads the value box of the omitted pages; false (certified
  /// policies only) bounds the omitted mass alone.
  bool outputBound = true;

  static Policy makeDense() {
    Policy p;
    p.dense = true;
    return p;
  }
  bool adaptive() const { return !dense && windowMax > window; }
  bool certified() const { return !dense && tau > 0.0; }
  /// `exact` and `sketch` rank tokens; the block selectors rank pages.
  bool tokenGranularity() const {
    return selector == Selector::Exact || selector == Selector::Sketch;
  }
  /// Whether selection ranks units relative to each query head of a GQA
  /// group of `group` (token units with a score row per query head, which
  /// the certificate takes: codegen's rankRelative).
  bool ranksRelative(int64_t group) const {
    return tokenGranularity() && certified() && group > 1;
  }
  /// Whether the certificate takes the lower bounds of the extras it adds
  /// into Z (certify with the sketch's page widths): a certified sketch
  /// policy with extras to walk (the dialect's
  /// PolicyAttr::takesExtrasLowerBounds).
  bool extrasLowerBounds() const {
    return certified() && selector == Selector::Sketch && maxExtra > 0;
  }
  int64_t unitTokens() const { return tokenGranularity() ? 1 : pageSize; }
  int64_t topUnits() const { return (topk + unitTokens() - 1) / unitTokens(); }
  /// Largest number of positions the condensate set can hold.
  int64_t budget() const {
    return anchor + windowMax + (topUnits() + maxExtra) * unitTokens();
  }
  /// Window for a repetition score in [0, 1] (the paper's adaptive rule:
  /// W = Wmin + (Wmax - Wmin) * RepScore, rounded to nearest).
  int64_t windowFor(double repScore) const;
  /// The #condensate.policy / #condensate.dense attribute text.
  std::string toMLIR() const;
  /// Checks the same constraints as the dialect's verifier.
  Status validate() const;
  bool operator==(const Policy &o) const;
  bool operator!=(const Policy &o) const { return !(*this == o); }
};

/// Assigns `policy` to `layers` (and only `kvHeads` when non-empty).
struct ScheduleRule {
  std::vector<int64_t> layers;
  std::vector<int64_t> kvHeads;
  Policy policy;
};

/// A whole model's policy assignment: later rules override earlier ones.
struct Schedule {
  int64_t numLayers = 0;
  Policy defaultPolicy;
  std::vector<ScheduleRule> rules;
  /// `depth = relative` (#condensate.schedule, "depth": "relative" in
  /// JSON): the rules name positions in depth of a numLayers-layer model,
  /// and atDepth() maps them onto any depth.
  bool relativeDepth = false;

  const Policy &policyFor(int64_t layer, int64_t kvHead) const;
  /// A schedule with `policy` on every layer.
  static Schedule uniform(int64_t numLayers, const Policy &policy);
  /// This schedule for a model of `layers` layers: itself at its own depth;
  /// at another, the uniform schedule of its default when it has no rules,
  /// or, when relativeDepth, its rules mapped by relative depth as
  /// `#condensate.schedule` documents it (CondensateAttrs.td), with fixed
  /// depth; an error otherwise.
  Result<Schedule> atDepth(int64_t layers) const;
  std::string toMLIR() const;
  Status validate() const;
  /// Bits of the key sketches the summaries carry: those of the sketch
  /// policies (validate() checks they agree), 0 when none uses them.
  int64_t sketchBits() const;
};

/// The window layer `layer`'s prefill function attends in
/// (abi::prefillWindowOf of its key/value heads' policies; window 0: dense).
abi::PrefillWindow prefillWindowOf(const Schedule &schedule, int64_t layer,
                                   int64_t kvHeads);

/// A model's attention shape and KV-cache layout.
struct ModelShape {
  int64_t numLayers = 0;
  int64_t qHeads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  int64_t pageSize = 16;
  KVType kvType = KVType::F32;
  float scale = 0.0f; ///< 0 means 1/sqrt(headDim)
  /// Bits of the key sketches the summaries carry (0: none). Programs that
  /// share a cache must agree; cacheShapeFor() fills it from a schedule.
  int64_t sketchBits = 0;

  float effectiveScale() const;
  int64_t group() const { return qHeads / kvHeads; }
  Status validate() const;
};

/// `shape` with the sketch bits `schedule` needs when it has none; an error
/// when the schedule's sketch policies need other bits than it has.
Result<ModelShape> cacheShapeFor(const ModelShape &shape,
                                 const Schedule &schedule);

/// The `condensate.model` op text for `shape` and `schedule`.
std::string modelToMLIR(const std::string &name, const ModelShape &shape,
                        const Schedule &schedule);

/// Parses a policy or schedule from JSON. A policy object applies to every
/// layer; a schedule object is {"default": policy, "rules": [{"layers":
/// [0, "2-7"], "kv_heads": [1], "policy": policy}]}. A policy is "dense" or
/// {"anchor", "window", "window_max", "topk", "selector", "page_size",
/// "tau" (number or "strict"), "max_extra", "bits", "output_bound"}.
/// `numLayers` sizes the schedule.
Result<Schedule> parseScheduleJSON(const std::string &text,
                                   int64_t numLayers);

/// The JSON form of `schedule` ({"layers", "default", "rules"}), which
/// parseScheduleJSON reads back to an equal schedule.
std::string scheduleToJSON(const Schedule &schedule);

/// {"layers", "q_heads", "kv_heads", "head_dim", "page_size", "kv_type",
/// "scale", "sketch_bits"}: the JSON form of a model shape (scale written as
/// the effective scale).
std::string modelShapeToJSON(const ModelShape &shape);
/// Reads a model shape object; page_size defaults to 16, kv_type to f32,
/// scale to 1/sqrt(head_dim). Unknown fields are errors.
Result<ModelShape> parseModelShapeJSON(const std::string &text);
/// {"model": shape, "schedule": schedule, "summary_rows": R,
/// "summary_slots": {"k_min", "k_max", "k_sum", "v_min", "v_max", "sketch"
/// (the first sketch row)}, "adaptive":
/// [per layer: whether it takes per-sequence windows], "stats": [column
/// names]}: what a caller of a compiled program needs to size its buffers
/// (the C APIs' describe functions).
std::string describeModelJSON(const ModelShape &shape,
                              const Schedule &schedule);
/// "f32", "f16", "bf16".
Result<KVType> parseKVType(const std::string &name);

/// A model's attention shape with its schedule.
struct ModelSpec {
  ModelShape shape;
  Schedule schedule;
};
/// Reads {"model": shape, "schedule": policy or schedule}; errors name
/// `bufferName`.
Result<ModelSpec> parseModelSpecJSON(const std::string &text,
                                     const std::string &bufferName);

/// Local repetition score in [0, 1] of the last `span` tokens: the fraction
/// of those positions whose bigram (previous token, token) already occurred
/// earlier in the same span. 0 for fewer than 3 tokens.
double repetitionScore(const int32_t *tokens, int64_t count,
                       int64_t span = 64);

} // namespace condensate

#endif // CONDENSATE_RUNTIME_POLICY_H
