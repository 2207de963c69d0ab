//===- Policy.cpp - policies and schedules for the runtime API ------------===//
//
// Validation and MLIR rendering of policies and schedules, and the
// repetition score that drives adaptive windows (JSON: PolicyJSON.cpp).
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Policy.h"

#include "condensate/ABI/AttentionABI.h"
#include "condensate/ABI/Limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_set>

namespace condensate {

namespace {
bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

std::string formatDouble(double v) {
  char buf[64];
  // Text that reads back as the same double.
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
} // namespace

const char *selectorName(Selector s) {
  switch (s) {
  case Selector::Exact:
    return "exact";
  case Selector::BlockMinMax:
    return "block_minmax";
  case Selector::BlockMean:
    return "block_mean";
  case Selector::Sketch:
    return "sketch";
  }
  return "?";
}

const char *kvTypeName(KVType t) {
  switch (t) {
  case KVType::F32:
    return "f32";
  case KVType::F16:
    return "f16";
  case KVType::BF16:
    return "bf16";
  }
  return "?";
}

int kvTypeBytes(KVType t) { return t == KVType::F32 ? 4 : 2; }

int64_t Policy::windowFor(double repScore) const {
  if (!adaptive())
    return window;
  double r = std::clamp(repScore, 0.0, 1.0);
  return window + static_cast<int64_t>(
                      std::llround(static_cast<double>(windowMax - window) * r));
}

std::string Policy::toMLIR() const {
  if (dense)
    return "#condensate.dense";
  std::ostringstream os;
  os << "#condensate.policy<anchor = " << anchor << ", window = " << window;
  if (adaptive())
    os << ", window_max = " << windowMax;
  os << ", topk = " << topk << ", selector = " << selectorName(selector);
  if (selector == Selector::Sketch)
    os << ", bits = " << sketchBits;
  os << ", page_size = " << pageSize;
  if (tau > 0.0)
    os << ", tau = " << (tau == abi::kStrictTau ? "strict" : formatDouble(tau));
  if (maxExtra > 0)
    os << ", max_extra = " << maxExtra;
  if (!outputBound)
    os << ", output_bound = false";
  os << ">";
  return os.str();
}

Status Policy::validate() const {
  if (dense)
    return Status::success();
  auto err = [](const std::string &m) { return Status::error("policy " + m); };
  if (anchor < 0)
    return err("anchor must be >= 0, got " + std::to_string(anchor));
  if (window < 0)
    return err("window must be >= 0, got " + std::to_string(window));
  if (windowMax < window)
    return err("window_max (" + std::to_string(windowMax) +
               ") must be >= window (" + std::to_string(window) + ")");
  if (topk < 0)
    return err("topk must be >= 0, got " + std::to_string(topk));
  for (auto [name, v] : {std::pair<const char *, int64_t>{"anchor", anchor},
                         {"window_max", windowMax},
                         {"topk", topk}})
    if (v > limits::kMaxPolicyTokens)
      return err(std::string(name) + " must be at most " +
                 std::to_string(limits::kMaxPolicyTokens) + ", got " +
                 std::to_string(v));
  if (anchor == 0 && windowMax == 0 && topk == 0)
    return err("attends to nothing: anchor, window and topk are all 0");
  if (!isPowerOfTwo(pageSize) || pageSize > 1024)
    return err("page_size must be a power of two in [1, 1024], got " +
               std::to_string(pageSize));
  if (!(tau >= 0.0 && tau < 1.0))
    return err("tau must be in [0, 1), got " + formatDouble(tau));
  if (maxExtra < 0)
    return err("max_extra must be >= 0, got " + std::to_string(maxExtra));
  if (maxExtra > limits::kMaxPolicyTokens / unitTokens())
    return err("max_extra must be at most " +
               std::to_string(limits::kMaxPolicyTokens / unitTokens()) +
               " units (" + std::to_string(limits::kMaxPolicyTokens) +
               " tokens), got " + std::to_string(maxExtra));
  if (maxExtra > 0 && tau == 0.0)
    return err("max_extra = " + std::to_string(maxExtra) +
               " needs a certified policy (tau > 0)");
  if (selector == Selector::Sketch && !abi::validSketchBits(sketchBits))
    return err("bits of a sketch must be 2, 4 or 8, got " +
               std::to_string(sketchBits));
  if (selector != Selector::Sketch && sketchBits != 0)
    return err("bits = " + std::to_string(sketchBits) +
               " needs selector sketch");
  if (!outputBound && tau == 0.0)
    return err("output_bound = false needs a certified policy (tau > 0)");
  return Status::success();
}

bool Policy::operator==(const Policy &o) const {
  if (dense || o.dense)
    return dense == o.dense;
  return anchor == o.anchor && window == o.window && windowMax == o.windowMax &&
         topk == o.topk && selector == o.selector && pageSize == o.pageSize &&
         tau == o.tau && maxExtra == o.maxExtra && sketchBits == o.sketchBits &&
         outputBound == o.outputBound;
}

const Policy &Schedule::policyFor(int64_t layer, int64_t kvHead) const {
  const Policy *result = &defaultPolicy;
  for (const ScheduleRule &rule : rules) {
    bool layerHit = std::find(rule.layers.begin(), rule.layers.end(),
                              layer) != rule.layers.end();
    bool headHit = rule.kvHeads.empty() ||
                   std::find(rule.kvHeads.begin(), rule.kvHeads.end(),
                             kvHead) != rule.kvHeads.end();
    if (layerHit && headHit)
      result = &rule.policy;
  }
  return *result;
}

Schedule Schedule::uniform(int64_t numLayers, const Policy &policy) {
  Schedule s;
  s.numLayers = numLayers;
  s.defaultPolicy = policy;
  return s;
}

static std::string indexList(const std::vector<int64_t> &v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

Result<Schedule> Schedule::atDepth(int64_t layers) const {
  if (layers <= 0 || layers > limits::kMaxLayers)
    return Status::error("a model of " + std::to_string(layers) +
                         " layers (must be in [1, " +
                         std::to_string(limits::kMaxLayers) + "])");
  if (layers == numLayers)
    return *this;
  if (rules.empty()) {
    Schedule s = *this;
    s.numLayers = layers;
    s.relativeDepth = false;
    return s;
  }
  if (!relativeDepth)
    return Status::error(
        "the schedule is for " + std::to_string(numLayers) +
        " layers (its rules name layers) but the model has " +
        std::to_string(layers) +
        "; a schedule of 'depth = relative' applies at any depth");
  if (numLayers <= 0 || numLayers > limits::kMaxLayers)
    return Status::error("schedule layers must be in [1, " +
                         std::to_string(limits::kMaxLayers) + "], got " +
                         std::to_string(numLayers));
  // Both maps stay within int64: layers, numLayers <= kMaxLayers.
  const int64_t from = numLayers, to = layers;
  Schedule s;
  s.numLayers = to;
  s.defaultPolicy = defaultPolicy;
  for (const ScheduleRule &r : rules) {
    std::vector<char> named(static_cast<size_t>(from), 0), claimed(
        static_cast<size_t>(to), 0);
    for (int64_t l : r.layers)
      if (l >= 0 && l < from) {
        named[static_cast<size_t>(l)] = 1;
        claimed[static_cast<size_t>((2 * l + 1) * to / (2 * from))] = 1;
      }
    for (int64_t l = 0; l < to; ++l)
      if (named[static_cast<size_t>((2 * l + 1) * from / (2 * to))])
        claimed[static_cast<size_t>(l)] = 1;
    ScheduleRule m;
    m.kvHeads = r.kvHeads;
    m.policy = r.policy;
    for (int64_t l = 0; l < to; ++l)
      if (claimed[static_cast<size_t>(l)])
        m.layers.push_back(l);
    if (!m.layers.empty())
      s.rules.push_back(std::move(m));
  }
  return s;
}

std::string Schedule::toMLIR() const {
  std::ostringstream os;
  os << "#condensate.schedule<layers = " << numLayers
     << (relativeDepth ? ", depth = relative" : "")
     << ", default = " << defaultPolicy.toMLIR() << ", rules = [";
  for (size_t i = 0; i < rules.size(); ++i) {
    const ScheduleRule &r = rules[i];
    os << (i ? ", " : "") << "#condensate.rule<layers = "
       << indexList(r.layers);
    if (!r.kvHeads.empty())
      os << ", kv_heads = " << indexList(r.kvHeads);
    os << ", policy = " << r.policy.toMLIR() << ">";
  }
  os << "]>";
  return os.str();
}

Status Schedule::validate() const {
  if (numLayers <= 0 || numLayers > limits::kMaxLayers)
    return Status::error("schedule layers must be in [1, " +
                         std::to_string(limits::kMaxLayers) + "], got " +
                         std::to_string(numLayers));
  if (static_cast<int64_t>(rules.size()) > limits::kMaxRules)
    return Status::error("schedule has " + std::to_string(rules.size()) +
                         " rules, more than " +
                         std::to_string(limits::kMaxRules));
  CONDENSATE_RETURN_IF_ERROR(defaultPolicy.validate().withContext("default"));
  for (size_t i = 0; i < rules.size(); ++i) {
    const ScheduleRule &r = rules[i];
    std::string where = "rule " + std::to_string(i);
    if (r.layers.empty())
      return Status::error(where + " names no layer");
    for (int64_t l : r.layers)
      if (l < 0 || l >= numLayers)
        return Status::error(where + " names layer " + std::to_string(l) +
                             " but the schedule has " +
                             std::to_string(numLayers) + " layers");
    if (static_cast<int64_t>(r.layers.size()) > limits::kMaxIndexEntries ||
        static_cast<int64_t>(r.kvHeads.size()) > limits::kMaxIndexEntries)
      return Status::error(where + " names more than " +
                           std::to_string(limits::kMaxIndexEntries) +
                           " indices");
    for (int64_t h : r.kvHeads)
      if (h < 0 || h >= limits::kMaxHeads)
        return Status::error(where + " names kv_head " + std::to_string(h) +
                             " outside [0, " +
                             std::to_string(limits::kMaxHeads) + ")");
    CONDENSATE_RETURN_IF_ERROR(r.policy.validate().withContext(where));
  }
  // One sketch width a model: the summaries of every layer have its rows.
  int64_t bits = 0;
  auto sameBits = [&](const Policy &p, const std::string &where) -> Status {
    if (p.dense || p.selector != Selector::Sketch)
      return Status::success();
    if (bits != 0 && p.sketchBits != bits)
      return Status::error(where + ": sketch policies of one schedule must "
                                   "use the same bits, got " +
                           std::to_string(bits) + " and " +
                           std::to_string(p.sketchBits));
    bits = p.sketchBits;
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(sameBits(defaultPolicy, "default"));
  for (size_t i = 0; i < rules.size(); ++i)
    CONDENSATE_RETURN_IF_ERROR(
        sameBits(rules[i].policy, "rule " + std::to_string(i)));
  return Status::success();
}

int64_t Schedule::sketchBits() const {
  auto bitsOf = [](const Policy &p) {
    return !p.dense && p.selector == Selector::Sketch ? p.sketchBits : 0;
  };
  if (int64_t b = bitsOf(defaultPolicy))
    return b;
  for (const ScheduleRule &r : rules)
    if (int64_t b = bitsOf(r.policy))
      return b;
  return 0;
}

Result<ModelShape> cacheShapeFor(const ModelShape &shape,
                                 const Schedule &schedule) {
  ModelShape out = shape;
  int64_t want = schedule.sketchBits();
  if (out.sketchBits == 0)
    out.sketchBits = want;
  else if (want != 0 && want != out.sketchBits)
    return Status::error("the schedule's sketch policies use " +
                         std::to_string(want) + " bits but the cache carries " +
                         std::to_string(out.sketchBits) + "-bit sketches");
  return out;
}

float ModelShape::effectiveScale() const {
  return scale > 0.0f ? scale
                      : 1.0f / std::sqrt(static_cast<float>(headDim));
}

Status ModelShape::validate() const {
  if (numLayers <= 0 || numLayers > limits::kMaxLayers)
    return Status::error("model layers must be in [1, " +
                         std::to_string(limits::kMaxLayers) + "], got " +
                         std::to_string(numLayers));
  if (qHeads <= 0 || kvHeads <= 0 || qHeads > limits::kMaxHeads ||
      kvHeads > limits::kMaxHeads)
    return Status::error("model head counts must be in [1, " +
                         std::to_string(limits::kMaxHeads) + "], got " +
                         std::to_string(qHeads) + " / " +
                         std::to_string(kvHeads));
  if (qHeads % kvHeads != 0)
    return Status::error("GQA ratio: " + std::to_string(qHeads) +
                         " query heads is not a multiple of " +
                         std::to_string(kvHeads) + " key/value heads");
  if (headDim <= 0 || headDim % 8 != 0 || headDim > 512)
    return Status::error("head_dim must be a positive multiple of 8 up to "
                         "512, got " +
                         std::to_string(headDim));
  if (!isPowerOfTwo(pageSize) || pageSize > 1024)
    return Status::error("page_size must be a power of two in [1, 1024], got " +
                         std::to_string(pageSize));
  if (sketchBits != 0 && !abi::validSketchBits(sketchBits))
    return Status::error("sketch_bits must be 0, 2, 4 or 8, got " +
                         std::to_string(sketchBits));
  return Status::success();
}

std::string modelToMLIR(const std::string &name, const ModelShape &shape,
                        const Schedule &schedule) {
  std::ostringstream os;
  os << "condensate.model @" << name << " layers = " << shape.numLayers
     << ", q_heads = " << shape.qHeads << ", kv_heads = " << shape.kvHeads
     << ", head_dim = " << shape.headDim << ", page_size = " << shape.pageSize
     << ", kv_type = " << kvTypeName(shape.kvType)
     << ", scale = " << formatDouble(shape.effectiveScale());
  if (shape.sketchBits != 0)
    os << ", sketch_bits = " << shape.sketchBits;
  os << ", schedule = " << schedule.toMLIR() << "\n";
  return os.str();
}

double repetitionScore(const int32_t *tokens, int64_t count, int64_t span) {
  if (count < 3 || span < 2)
    return 0.0;
  int64_t begin = std::max<int64_t>(1, count - span);
  std::unordered_set<uint64_t> seen;
  int64_t repeated = 0, total = 0;
  for (int64_t i = begin; i < count; ++i) {
    uint64_t bigram = (static_cast<uint64_t>(static_cast<uint32_t>(
                           tokens[i - 1]))
                       << 32) |
                      static_cast<uint32_t>(tokens[i]);
    if (!seen.insert(bigram).second)
      ++repeated;
    ++total;
  }
  return total ? static_cast<double>(repeated) / static_cast<double>(total)
               : 0.0;
}

abi::PrefillWindow prefillWindowOf(const Schedule &schedule, int64_t layer,
                                   int64_t kvHeads) {
  const Policy &p = schedule.policyFor(layer, 0);
  bool uniform = true;
  for (int64_t g = 1; g < kvHeads; ++g)
    uniform &= schedule.policyFor(layer, g) == p;
  return abi::prefillWindowOf(uniform, p.dense, p.topk > 0 || p.certified(),
                              p.adaptive(), p.window, p.anchor);
}

} // namespace condensate
