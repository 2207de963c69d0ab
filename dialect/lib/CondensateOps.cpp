//===- CondensateOps.cpp - condensate operation verifiers -----------------===//
//
// Verifiers for the condensate ops: every shape, element type, head_dim,
// GQA-ratio, page-size and budget mismatch gets a diagnostic that names the
// operand, what it has and what was expected.
//
//===----------------------------------------------------------------------===//
#include "condensate/Dialect/CondensateDialect.h"
#include "condensate/ABI/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::condensate;
namespace limits = ::condensate::limits;

#define GET_OP_CLASSES
#include "condensate/Dialect/CondensateOps.cpp.inc"

namespace {

/// Checks operand shapes against named dimensions that are bound on first
/// sight (B, Hq, Hkv, D, P, ...) and reports the first mismatch.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  /// Checks that `value` is a memref of rank `dims.size()` whose dimension i
  /// agrees with the named dimension dims[i] ("" = unconstrained, a number
  /// = that exact size).
  LogicalResult check(Value value, StringRef operand,
                      ArrayRef<StringRef> dims) {
    if (!value)
      return success();
    auto type = cast<MemRefType>(value.getType());
    if (type.getRank() != static_cast<int64_t>(dims.size()))
      return op->emitOpError()
             << "operand '" << operand << "' must have rank " << dims.size()
             << " (" << llvm::join(dims, " x ") << "), got " << type;
    // Rows are read as vectors: the innermost dimension must be contiguous.
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        (!strides.empty() && strides.back() != 1))
      return op->emitOpError()
             << "operand '" << operand
             << "' must be strided with unit stride in its last dimension, got "
             << type;
    for (auto [i, name] : llvm::enumerate(dims)) {
      int64_t size = type.getDimSize(i);
      if (name.empty() || ShapedType::isDynamic(size))
        continue;
      int64_t fixed;
      if (!name.getAsInteger(10, fixed)) {
        if (size != fixed)
          return op->emitOpError()
                 << "operand '" << operand << "' dimension " << i
                 << " must be " << fixed << ", got " << size;
        continue;
      }
      auto it = bound.find(name);
      if (it == bound.end()) {
        bound[name] = {size, operand.str()};
        continue;
      }
      if (it->second.first != size)
        return op->emitOpError()
               << describe(name) << " mismatch: '" << it->second.second
               << "' has " << it->second.first << " but '" << operand
               << "' has " << size;
    }
    return success();
  }

  /// The static size bound to `name`, if any.
  std::optional<int64_t> get(StringRef name) const {
    auto it = bound.find(name);
    if (it == bound.end())
      return std::nullopt;
    return it->second.first;
  }

  /// For stage ops: the named dimensions must be static (the lowerings
  /// specialise on them) and head_dim a multiple of 8.
  LogicalResult requireStatic(ArrayRef<StringRef> names) {
    for (StringRef name : names) {
      if (!get(name))
        return op->emitOpError()
               << describe(name)
               << " must be static in a stage op (run condensate-specialize)";
    }
    if (auto d = get("D"); d && *d % 8 != 0)
      return op->emitOpError()
             << "head_dim must be a multiple of 8, got " << *d;
    return success();
  }

  /// Checks Hq % Hkv == 0 when both are static.
  LogicalResult checkGroup() {
    auto hq = get("Hq"), hkv = get("Hkv");
    if (hq && hkv && *hq % *hkv != 0)
      return op->emitOpError()
             << "GQA ratio: " << *hq
             << " query heads is not a multiple of " << *hkv
             << " key/value heads";
    return success();
  }

private:
  static std::string describe(StringRef name) {
    if (name == "D")
      return "head_dim";
    if (name == "P")
      return "page size";
    if (name == "Hq")
      return "query head count";
    if (name == "Hkv")
      return "key/value head count";
    if (name == "B")
      return "batch size";
    if (name == "NP")
      return "page pool size";
    if (name == "MP")
      return "pages-per-sequence";
    return ("dimension " + name).str();
  }

  Operation *op;
  llvm::StringMap<std::pair<int64_t, std::string>> bound;
};

/// Checks that k and v caches have the same type.
LogicalResult checkSameKV(Operation *op, Value k, Value v) {
  if (k.getType() != v.getType())
    return op->emitOpError() << "k_cache and v_cache must have the same "
                                "type, got "
                             << k.getType() << " and " << v.getType();
  return success();
}

LogicalResult checkScale(Operation *op, FloatAttr scale) {
  double s = scale.getValueAsDouble();
  if (!(s > 0.0) || !std::isfinite(s))
    return op->emitOpError() << "scale must be finite and > 0, got " << s;
  return success();
}

LogicalResult checkNonNegative(Operation *op, StringRef name, int64_t v) {
  if (v < 0)
    return op->emitOpError() << name << " must be >= 0, got " << v;
  return success();
}

LogicalResult checkPageSize(Operation *op, int64_t p) {
  if (p <= 0 || (p & (p - 1)) != 0)
    return op->emitOpError() << "page_size must be a power of two, got " << p;
  return success();
}

/// Checks one policy against the cache it runs on.
LogicalResult checkPolicyAgainstCache(Operation *op, Attribute policyAttr,
                                      StringRef where, const ShapeChecker &sc,
                                      bool haveSummaries, bool haveWindows) {
  if (!isPolicyLike(policyAttr))
    return op->emitOpError() << where
                             << " must be #condensate.policy or "
                                "#condensate.dense, got "
                             << policyAttr;
  auto policy = dyn_cast<PolicyAttr>(policyAttr);
  if (!policy)
    return success();
  // Block selectors and sketches read the page summaries.
  bool blockSelector = policy.getGranularity() == Granularity::page ||
                       policy.getSelector() == Selector::sketch;
  if (auto p = sc.get("P"); blockSelector && p && *p != policy.getPageSize())
    return op->emitOpError()
           << where << " page_size " << policy.getPageSize()
           << " does not match the KV cache page size " << *p;
  if (blockSelector && policy.needsScores() && !haveSummaries)
    return op->emitOpError()
           << where << " uses selector "
           << stringifySelector(policy.getSelector())
           << ", which needs the 'summaries' operand";
  if (policy.isAdaptive() && !haveWindows)
    return op->emitOpError() << where << " has an adaptive window ("
                             << policy.getWindow() << " to "
                             << policy.getWindowMax()
                             << "), which needs the 'windows' operand";
  return success();
}

/// The rows R of a summaries operand: at least the summary slots; with
/// `sketchBits` known and the page size P bound, exactly summaryRows(P,
/// bits).
LogicalResult checkSummaryRows(Operation *op, const ShapeChecker &sc,
                               std::optional<int64_t> sketchBits) {
  auto r = sc.get("R");
  if (!r)
    return success();
  if (*r < kSummarySlots)
    return op->emitOpError() << "operand 'summaries' must have at least "
                             << kSummarySlots << " rows, got " << *r;
  auto p = sc.get("P");
  if (!sketchBits || !p)
    return success();
  int64_t want = ::condensate::abi::summaryRows(*p, *sketchBits);
  if (*r != want)
    return op->emitOpError()
           << "operand 'summaries' must have " << want << " rows (page size "
           << *p << ", " << *sketchBits << "-bit sketches), got " << *r;
  return success();
}

/// The sketch bits the policies of `policies` share (0 without sketches).
std::optional<int64_t> sketchBitsOf(ArrayRef<Attribute> policies) {
  int64_t bits = 0;
  for (Attribute a : policies)
    if (auto p = dyn_cast_or_null<PolicyAttr>(a);
        p && p.getSelector() == Selector::sketch) {
      if (bits != 0 && bits != p.getSketchBits())
        return std::nullopt;
      bits = p.getSketchBits();
    }
  return bits;
}

} // namespace

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

int64_t ModelOp::getCacheSketchBits() {
  if (auto bits = getSketchBits())
    return *bits;
  return getSchedule().getSketchBits();
}

float ModelOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToFloat();
  return 1.0f / std::sqrt(static_cast<float>(getHeadDim()));
}

LogicalResult ModelOp::verify() {
  int64_t layers = getNumLayers(), hq = getNumQHeads(), hkv = getNumKvHeads();
  int64_t d = getHeadDim(), p = getPageSize();
  if (layers <= 0 || layers > limits::kMaxLayers)
    return emitOpError() << "layers must be in [1, " << limits::kMaxLayers
                         << "], got " << layers;
  if (hq <= 0 || hkv <= 0 || hq > limits::kMaxHeads || hkv > limits::kMaxHeads)
    return emitOpError() << "head counts must be in [1, "
                         << limits::kMaxHeads << "], got " << hq << " / "
                         << hkv;
  if (hq % hkv != 0)
    return emitOpError() << "GQA ratio: " << hq
                         << " query heads is not a multiple of " << hkv
                         << " key/value heads";
  if (d <= 0 || d % 8 != 0 || d > 512)
    return emitOpError()
           << "head_dim must be a positive multiple of 8 up to 512, got " << d;
  if (failed(checkPageSize(*this, p)))
    return failure();
  Type t = getKvType();
  if (!t.isF32() && !t.isF16() && !t.isBF16())
    return emitOpError() << "kv_type must be f32, f16 or bf16, got " << t;
  if (auto s = getScale())
    if (failed(checkScale(*this, getScaleAttr())))
      return failure();
  ScheduleAttr schedule = getSchedule();
  if (auto bits = getSketchBits()) {
    if (*bits != 0 && !::condensate::abi::validSketchBits(*bits))
      return emitOpError() << "sketch_bits must be 0, 2, 4 or 8, got "
                           << *bits;
    if (schedule.getSketchBits() != 0 && schedule.getSketchBits() != *bits)
      return emitOpError() << "the schedule's sketch policies use "
                           << schedule.getSketchBits()
                           << " bits but the cache carries " << *bits
                           << "-bit sketches";
  }
  if (schedule.getNumLayers() != layers)
    return emitOpError() << "schedule is for " << schedule.getNumLayers()
                         << " layers but the model has " << layers;
  for (auto [i, rule] : llvm::enumerate(schedule.getRules()))
    for (int64_t h : rule.getKvHeads())
      if (h >= hkv)
        return emitOpError() << "schedule rule " << i << " names kv_head "
                             << h << " but the model has " << hkv
                             << " key/value heads";
  SmallVector<Attribute> policies = schedule.resolve(hkv);
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < hkv; ++h)
      if (auto policy = dyn_cast<PolicyAttr>(policies[l * hkv + h]))
        if ((policy.getGranularity() == Granularity::page ||
             policy.getSelector() == Selector::sketch) &&
            policy.getPageSize() != p)
          return emitOpError()
                 << "layer " << l << " policy page_size "
                 << policy.getPageSize()
                 << " does not match the model's page_size " << p;
  return success();
}

//===----------------------------------------------------------------------===//
// DecodeAttentionOp
//===----------------------------------------------------------------------===//

Attribute DecodeAttentionOp::getPolicyForHead(int64_t kvHead) {
  if (auto heads = getHeadPolicies())
    if (kvHead < static_cast<int64_t>(heads->size()))
      return (*heads)[kvHead];
  return getPolicy();
}

LogicalResult DecodeAttentionOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getVCache(), "v_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getWindows(), "windows", {"B"})) ||
      failed(sc.check(getSummaries(), "summaries",
                      {"NP", "Hkv", "R", "D"})) ||
      failed(sc.check(getOut(), "out", {"B", "Hq", "D"})) ||
      failed(sc.check(getStats(), "stats",
                      {"B", "Hq", std::to_string(kStatsWidth)})) ||
      failed(sc.checkGroup()) ||
      failed(checkSameKV(*this, getKCache(), getVCache())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  bool haveSummaries = static_cast<bool>(getSummaries());
  bool haveWindows = static_cast<bool>(getWindows());
  if (failed(checkPolicyAgainstCache(*this, getPolicy(), "policy", sc,
                                     haveSummaries, haveWindows)))
    return failure();
  if (auto heads = getHeadPolicies()) {
    if (auto hkv = sc.get("Hkv");
        hkv && static_cast<int64_t>(heads->size()) != *hkv)
      return emitOpError() << "head_policies has " << heads->size()
                           << " entries but there are " << *hkv
                           << " key/value heads";
    for (auto [i, p] : llvm::enumerate(*heads))
      if (failed(checkPolicyAgainstCache(
              *this, p, ("head_policies[" + Twine(i) + "]").str(), sc,
              haveSummaries, haveWindows)))
        return failure();
  }
  SmallVector<Attribute> policies{getPolicy()};
  if (auto heads = getHeadPolicies())
    policies.append(heads->begin(), heads->end());
  std::optional<int64_t> bits = sketchBitsOf(policies);
  if (!bits)
    return emitOpError() << "sketch policies of one decode_attention must use "
                            "the same bits";
  // Other layers' sketches may share the summaries: only a layer that reads
  // sketches fixes their rows.
  if (failed(checkSummaryRows(*this, sc,
                              *bits ? bits : std::optional<int64_t>())))
    return failure();
  if (auto spec = getSpecAttr()) {
    auto expect = [&](StringRef name, StringRef dim,
                      int64_t value) -> LogicalResult {
      if (auto v = sc.get(dim); v && *v != value)
        return emitOpError() << "spec " << name << " " << value
                             << " does not match the operands' " << *v;
      return success();
    };
    if (failed(expect("head_dim", "D", spec.getHeadDim())) ||
        failed(expect("q_heads", "Hq", spec.getQHeads())) ||
        failed(expect("kv_heads", "Hkv", spec.getKvHeads())) ||
        failed(expect("page_size", "P", spec.getPageSize())))
      return failure();
    Type kvElt = getKCache().getType().getElementType();
    if (kvElt != spec.getKvType())
      return emitOpError() << "spec kv_type " << spec.getKvType()
                           << " does not match the cache element type "
                           << kvElt;
    // Every sparse head must fit the specialised budget.
    int64_t hkv = spec.getKvHeads();
    for (int64_t g = 0; g < hkv; ++g) {
      auto policy = dyn_cast<PolicyAttr>(getPolicyForHead(g));
      if (!policy)
        continue;
      if (policy.getTopUnits() > spec.getTopUnits())
        return emitOpError()
               << "budget mismatch: the policy of kv head " << g << " keeps "
               << policy.getTopUnits() << " units (topk " << policy.getTopk()
               << ", unit " << policy.getUnitTokens()
               << " tokens) but spec top_units is " << spec.getTopUnits();
      if (policy.getMaxExtra() > spec.getExtraUnits())
        return emitOpError()
               << "budget mismatch: the policy of kv head " << g
               << " allows " << policy.getMaxExtra()
               << " extra units but spec extra_units is "
               << spec.getExtraUnits();
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AppendKVOp
//===----------------------------------------------------------------------===//

LogicalResult AppendKVOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getKNew(), "k_new", {"B", "Hkv", "D"})) ||
      failed(sc.check(getVNew(), "v_new", {"B", "Hkv", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getVCache(), "v_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getPositions(), "positions", {"B"})) ||
      failed(sc.check(getSummaries(), "summaries",
                      {"NP", "Hkv", "R", "D"})) ||
      failed(sc.requireStatic({"Hkv", "P", "D"})) ||
      failed(checkSameKV(*this, getKCache(), getVCache())))
    return failure();
  int64_t bits = getSketchBits();
  if (bits != 0 && !::condensate::abi::validSketchBits(bits))
    return emitOpError() << "sketch_bits must be 0, 2, 4 or 8, got " << bits;
  if (bits != 0 && !getSummaries())
    return emitOpError() << "sketch_bits = " << bits
                         << " needs the 'summaries' operand";
  return checkSummaryRows(*this, sc, bits);
}

//===----------------------------------------------------------------------===//
// PrefillAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult PrefillAttentionOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"R", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getVCache(), "v_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"S", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"S"})) ||
      failed(sc.check(getRowStarts(), "row_starts", {""})) ||
      failed(sc.check(getOut(), "out", {"R", "Hq", "D"})) ||
      failed(sc.checkGroup()) ||
      failed(sc.requireStatic({"Hq", "Hkv", "D", "P"})) ||
      failed(checkScale(*this, getScaleAttr())) ||
      failed(checkNonNegative(*this, "window", getWindow())) ||
      failed(checkNonNegative(*this, "anchor", getAnchor())))
    return failure();
  auto s = sc.get("S");
  int64_t starts = getRowStarts().getType().getDimSize(0);
  if (s && !ShapedType::isDynamic(starts) && starts != *s + 1)
    return emitOpError() << "row_starts must have one more entry than lens ("
                         << *s + 1 << "), got " << starts;
  if (getWindow() == 0 && getAnchor() != 0)
    return emitOpError() << "anchor = " << getAnchor()
                         << " needs a window (window = 0 attends to every "
                            "earlier position)";
  return success();
}

//===----------------------------------------------------------------------===//
// Stages
//===----------------------------------------------------------------------===//

LogicalResult ScorePagesOp::verify() {
  ShapeChecker sc(*this);
  if (getSelector() == Selector::exact)
    return emitOpError() << "selector exact scores tokens; use "
                            "condensate.score_tokens";
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getSummaries(), "summaries",
                      {"NP", "Hkv", "R", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getScores(), "scores", {"B", "Hq", "MP"})) ||
      failed(sc.checkGroup()) || failed(sc.requireStatic({"Hq", "Hkv", "D"})) ||
      failed(checkPageSize(*this, getPageSizeAttr().getInt())) ||
      failed(checkScale(*this, getScaleAttr())) ||
      failed(checkSummaryRows(*this, sc, std::nullopt)))
    return failure();
  return success();
}

/// The rows of a token-scoring op's `scores`: one per query head, or one
/// per key/value head (the group's max). Needs Hq and Hkv bound.
static LogicalResult checkScoreRows(Operation *op, const ShapeChecker &sc,
                                    Value scores) {
  int64_t rows = cast<MemRefType>(scores.getType()).getDimSize(1);
  int64_t hq = *sc.get("Hq"), hkv = *sc.get("Hkv");
  if (rows != hq && rows != hkv)
    return op->emitOpError()
           << "operand 'scores' dimension 1 must be the query heads (" << hq
           << ") or the key/value heads (" << hkv
           << ", each its group's max), got "
           << (ShapedType::isDynamic(rows) ? std::string("?")
                                           : std::to_string(rows));
  return success();
}

/// Scores of one row per key/value head, where that differs from one per
/// query head.
static bool perGroupRows(Value q, Value scores) {
  return cast<MemRefType>(scores.getType()).getDimSize(1) !=
         cast<MemRefType>(q.getType()).getDimSize(1);
}

bool ScoreSketchOp::scoresPerGroup() {
  return perGroupRows(getQ(), getScores());
}
bool ScoreTokensOp::scoresPerGroup() {
  return perGroupRows(getQ(), getScores());
}

LogicalResult ScoreSketchOp::verify() {
  ShapeChecker sc(*this);
  int64_t p = getPageSize(), bits = getBits();
  if (!::condensate::abi::validSketchBits(bits))
    return emitOpError() << "bits must be 2, 4 or 8, got " << bits;
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getSummaries(), "summaries",
                      {"NP", "Hkv",
                       std::to_string(::condensate::abi::summaryRows(p, bits)),
                       "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getScores(), "scores", {"B", "", "N"})) ||
      failed(sc.check(getWidths(), "widths", {"B", "Hq", "MP"})) ||
      failed(sc.checkGroup()) || failed(sc.requireStatic({"Hq", "Hkv", "D"})) ||
      failed(checkScoreRows(*this, sc, getScores())) ||
      failed(checkPageSize(*this, p)) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  // Widths bound each query head's scores: a row per key/value head is a
  // max over heads, which a head's lower bound cannot be taken from.
  if (getWidths() && scoresPerGroup())
    return emitOpError() << "'widths' needs scores of one row per query "
                            "head";
  auto mp = sc.get("MP"), n = sc.get("N");
  if (mp && n && *n != *mp * p)
    return emitOpError() << "scores must hold MP * page_size = " << *mp * p
                         << " tokens per head, got " << *n;
  return success();
}

LogicalResult ScoreTokensOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getScores(), "scores", {"B", "", "N"})) ||
      failed(sc.checkGroup()) ||
      failed(sc.requireStatic({"Hq", "Hkv", "D", "P"})) ||
      failed(checkScoreRows(*this, sc, getScores())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  auto mp = sc.get("MP"), p = sc.get("P"), n = sc.get("N");
  if (mp && p && n && *n != *mp * *p)
    return emitOpError() << "scores must hold MP * P = " << *mp * *p
                         << " tokens per head, got " << *n;
  return success();
}

LogicalResult SelectTopKOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getScores(), "scores", {"B", "Hq", "N"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getWindows(), "windows", {"B"})) ||
      failed(sc.check(getIndices(), "indices", {"B", "Hkv", "K"})) ||
      failed(sc.checkGroup()) || failed(sc.requireStatic({"Hq", "Hkv"})) ||
      failed(checkNonNegative(*this, "anchor", getAnchorAttr().getInt())) ||
      failed(checkNonNegative(*this, "window", getWindowAttr().getInt())) ||
      failed(checkPageSize(*this, getPageSizeAttr().getInt())))
    return failure();
  if (getWindowMaxAttr().getInt() < getWindowAttr().getInt())
    return emitOpError() << "window_max (" << getWindowMaxAttr().getInt()
                         << ") must be >= window (" << getWindowAttr().getInt()
                         << ")";
  int64_t slots = getIndices().getType().getDimSize(2);
  if (ShapedType::isDynamic(slots))
    return emitOpError() << "indices must have a static unit count "
                            "(dimension 2)";
  int64_t base = getBaseAttr().getInt();
  if (base < 0 || base > slots)
    return emitOpError() << "budget mismatch: base " << base
                         << " must be in [0, " << slots
                         << "] (the index slots)";
  return success();
}

int64_t SparseAttendOp::getNumSplits() {
  return getPartialMl().getType().getDimSize(2);
}

/// The page size of a KV cache operand (dimension 2).
static int64_t cachePageSize(Value kv) {
  return cast<MemRefType>(kv.getType()).getDimSize(2);
}

int64_t SparseAttendOp::getVirtualLength() {
  int64_t unit =
      getGranularity() == Granularity::token ? 1 : cachePageSize(getKCache());
  int64_t forced = getIncludeForced() ? getAnchor() + getWindowMax() : 0;
  return forced + getCount() * unit;
}

LogicalResult SparseAttendOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getVCache(), "v_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getWindows(), "windows", {"B"})) ||
      failed(sc.check(getIndices(), "indices", {"B", "Hkv", "K"})) ||
      failed(sc.check(getLimits(), "limits", {"B", "Hkv"})) ||
      failed(sc.check(getSkip(), "skip", {"B", "Hkv"})) ||
      failed(sc.check(getPartialO(), "partial_o", {"B", "Hq", "S", "D"})) ||
      failed(sc.check(getPartialMl(), "partial_ml",
                      {"B", "Hq", "S", std::to_string(kPartialMLWidth)})) ||
      failed(sc.checkGroup()) ||
      failed(sc.requireStatic({"Hq", "Hkv", "D", "P"})) ||
      failed(checkSameKV(*this, getKCache(), getVCache())) ||
      failed(checkNonNegative(*this, "anchor", getAnchorAttr().getInt())) ||
      failed(checkNonNegative(*this, "window", getWindowAttr().getInt())) ||
      failed(checkNonNegative(*this, "first", getFirstAttr().getInt())) ||
      failed(checkNonNegative(*this, "count", getCountAttr().getInt())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  if (getWindowMaxAttr().getInt() < getWindowAttr().getInt())
    return emitOpError() << "window_max (" << getWindowMaxAttr().getInt()
                         << ") must be >= window (" << getWindowAttr().getInt()
                         << ")";
  if (ShapedType::isDynamic(getNumSplits()))
    return emitOpError() << "partials must have a static split count";
  if (getCount() > 0 && !getIndices())
    return emitOpError() << "count = " << getCount()
                         << " units need the 'indices' operand";
  if (auto k = sc.get("K"); k && getFirst() + getCount() > *k)
    return emitOpError() << "budget mismatch: units [" << getFirst() << ", "
                         << getFirst() + getCount()
                         << ") do not fit the " << *k << " index slots";
  if (getVirtualLength() == 0)
    return emitOpError() << "attends to nothing (no anchor, window or units)";
  return success();
}

LogicalResult DenseAttendOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getVCache(), "v_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getMask(), "mask", {"B", "Hkv"})) ||
      failed(sc.check(getPartialO(), "partial_o", {"B", "Hq", "S", "D"})) ||
      failed(sc.check(getPartialMl(), "partial_ml",
                      {"B", "Hq", "S", std::to_string(kPartialMLWidth)})) ||
      failed(sc.checkGroup()) ||
      failed(sc.requireStatic({"Hq", "Hkv", "D", "P"})) ||
      failed(checkSameKV(*this, getKCache(), getVCache())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  if (ShapedType::isDynamic(getPartialMl().getType().getDimSize(2)))
    return emitOpError() << "partials must have a static split count";
  return success();
}

LogicalResult PrecertifyOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getQ(), "q", {"B", "Hq", "D"})) ||
      failed(sc.check(getKCache(), "k_cache", {"NP", "Hkv", "P", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getScores(), "scores", {"B", "Hq", "N"})) ||
      failed(sc.check(getBounds(), "bounds", {"B", "Hq", "N"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getWindows(), "windows", {"B"})) ||
      failed(sc.check(getIndices(), "indices", {"B", "Hkv", "K"})) ||
      failed(sc.check(getEarly(), "early", {"B", "Hkv"})) ||
      failed(sc.checkGroup()) ||
      failed(sc.requireStatic({"Hq", "Hkv", "D", "P"})) ||
      failed(checkNonNegative(*this, "anchor", getAnchorAttr().getInt())) ||
      failed(checkNonNegative(*this, "window", getWindowAttr().getInt())) ||
      failed(
          checkNonNegative(*this, "base_units", getBaseUnitsAttr().getInt())) ||
      failed(checkPageSize(*this, getPageSizeAttr().getInt())) ||
      failed(checkScale(*this, getScaleAttr())))
    return failure();
  if (*sc.get("P") != getPageSize())
    return emitOpError() << "page_size = " << getPageSize()
                         << " but the key cache has pages of " << *sc.get("P");
  if (getWindowMaxAttr().getInt() < getWindowAttr().getInt())
    return emitOpError() << "window_max (" << getWindowMaxAttr().getInt()
                         << ") must be >= window (" << getWindowAttr().getInt()
                         << ")";
  double tau = getTau().convertToDouble();
  if (!(tau > 0.0 && tau < 1.0))
    return emitOpError() << "tau must be in (0, 1), got " << tau;
  if (ShapedType::isDynamic(getIndices().getType().getDimSize(2)))
    return emitOpError() << "indices must have a static unit count "
                            "(dimension 2)";
  if (getBaseUnits() > *sc.get("K"))
    return emitOpError() << "budget mismatch: base_units " << getBaseUnits()
                         << " exceeds the " << *sc.get("K") << " index slots";
  return success();
}

LogicalResult CertifyOp::verify() {
  ShapeChecker sc(*this);
  if (failed(sc.check(getScores(), "scores", {"B", "Hq", "N"})) ||
      failed(sc.check(getLens(), "lens", {"B"})) ||
      failed(sc.check(getWindows(), "windows", {"B"})) ||
      failed(sc.check(getIndices(), "indices", {"B", "Hkv", "K"})) ||
      failed(sc.check(getPartialO(), "partial_o", {"B", "Hq", "S", ""})) ||
      failed(sc.check(getPartialMl(), "partial_ml",
                      {"B", "Hq", "S", std::to_string(kPartialMLWidth)})) ||
      failed(sc.check(getExtra(), "extra", {"B", "Hkv"})) ||
      failed(sc.check(getFallback(), "fallback", {"B", "Hkv"})) ||
      failed(sc.check(getStats(), "stats",
                      {"B", "Hq", std::to_string(kStatsWidth)})) ||
      failed(sc.check(getEarly(), "early", {"B", "Hkv"})) ||
      failed(sc.check(getSummaries(), "summaries", {"NP", "Hkv", "R", "D"})) ||
      failed(sc.check(getPageTable(), "page_table", {"B", "MP"})) ||
      failed(sc.check(getVbox(), "vbox",
                      {"B", "Hkv", std::to_string(kValueBoxRows), "D"})) ||
      failed(sc.checkGroup()) || failed(sc.requireStatic({"Hq", "Hkv"})) ||
      failed(checkNonNegative(*this, "anchor", getAnchorAttr().getInt())) ||
      failed(checkNonNegative(*this, "window", getWindowAttr().getInt())) ||
      failed(
          checkNonNegative(*this, "base_units", getBaseUnitsAttr().getInt())) ||
      failed(checkPageSize(*this, getPageSizeAttr().getInt())) ||
      failed(checkSummaryRows(*this, sc, std::nullopt)))
    return failure();
  if (getWindowMaxAttr().getInt() < getWindowAttr().getInt())
    return emitOpError() << "window_max (" << getWindowMaxAttr().getInt()
                         << ") must be >= window (" << getWindowAttr().getInt()
                         << ")";
  double tau = getTau().convertToDouble();
  if (!(tau >= 0.0 && tau < 1.0))
    return emitOpError() << "tau must be in [0, 1), got " << tau;
  if (ShapedType::isDynamic(getIndices().getType().getDimSize(2)))
    return emitOpError() << "indices must have a static unit count "
                            "(dimension 2)";
  if (auto k = sc.get("K"); k && getBaseUnits() > *k)
    return emitOpError() << "budget mismatch: base_units " << getBaseUnits()
                         << " exceeds the " << *k << " index slots";
  // The value box is computed from the page summaries through the page
  // table: all three come together.
  if (getVbox() && (!getSummaries() || !getPageTable()))
    return emitOpError() << "'vbox' needs the 'summaries' and 'pages' "
                            "operands it is computed from";
  if (!getVbox() && (getSummaries() || getPageTable()))
    return emitOpError() << "'" << (getSummaries() ? "summaries" : "pages")
                         << "' is only read to compute 'vbox', which is "
                            "missing";
  // The box rows are read and written as head_dim vectors.
  if (getVbox() && failed(sc.requireStatic({"D"})))
    return failure();
  // Lower bounds per token from a page width: score_sketch's.
  if (getWidths()) {
    if (getGranularity() != Granularity::token)
      return emitOpError() << "'widths' needs token granularity (a page "
                              "width bounds each token of the page)";
    if (failed(sc.check(getWidths(), "widths", {"B", "Hq", "W"})))
      return failure();
    auto wp = sc.get("W"), n = sc.get("N");
    if (wp && n && *wp * getPageSize() != *n)
      return emitOpError() << "widths must hold one entry per page of the "
                           << *n << " score slots (" << *n / getPageSize()
                           << " pages of " << getPageSize() << "), got " << *wp;
  }
  return success();
}

LogicalResult MergeOp::verify() {
  ShapeChecker sc(*this);
  if (getPartials().empty() || getPartials().size() % 2 != 0)
    return emitOpError() << "partials must be non-empty (o, ml) pairs, got "
                         << getPartials().size() << " buffers";
  for (size_t i = 0; i < getPartials().size(); i += 2) {
    std::string o = "partials[" + std::to_string(i) + "]";
    std::string ml = "partials[" + std::to_string(i + 1) + "]";
    if (failed(sc.check(getPartials()[i], o, {"B", "Hq", "", "D"})) ||
        failed(sc.check(getPartials()[i + 1], ml,
                        {"B", "Hq", "", std::to_string(kPartialMLWidth)})))
      return failure();
    auto so = cast<MemRefType>(getPartials()[i].getType()).getDimSize(2);
    auto sm = cast<MemRefType>(getPartials()[i + 1].getType()).getDimSize(2);
    if (!ShapedType::isDynamic(so) && !ShapedType::isDynamic(sm) && so != sm)
      return emitOpError() << "split count mismatch in pair " << i / 2
                           << ": o has " << so << ", ml has " << sm;
  }
  for (Value v : getPartials())
    if (ShapedType::isDynamic(cast<MemRefType>(v.getType()).getDimSize(2)))
      return emitOpError() << "partials must have a static split count";
  for (Value v : getDense())
    if (ShapedType::isDynamic(cast<MemRefType>(v.getType()).getDimSize(2)))
      return emitOpError() << "dense partials must have a static split count";
  if (getFallback() &&
      ShapedType::isDynamic(getFallback().getType().getDimSize(1)))
    return emitOpError() << "fallback must have a static key/value head "
                            "count (dimension 1)";
  if (!getDense().empty() && getDense().size() != 2)
    return emitOpError() << "dense must be one (o, ml) pair, got "
                         << getDense().size() << " buffers";
  if (getDense().empty() != !getFallback())
    return emitOpError() << "'fallback' and 'dense' must be given together";
  if (!getDense().empty() &&
      (failed(sc.check(getDense()[0], "dense o", {"B", "Hq", "", "D"})) ||
       failed(sc.check(getDense()[1], "dense ml",
                       {"B", "Hq", "", std::to_string(kPartialMLWidth)}))))
    return failure();
  if (failed(sc.check(getFallback(), "fallback", {"B", "Hkv"})) ||
      failed(sc.check(getOut(), "out", {"B", "Hq", "D"})) ||
      failed(sc.check(getStats(), "stats",
                      {"B", "Hq", std::to_string(kStatsWidth)})) ||
      failed(sc.check(getVbox(), "vbox",
                      {"B", "Hkv", std::to_string(kValueBoxRows), "D"})) ||
      failed(sc.checkGroup()) || failed(sc.requireStatic({"Hq", "D"})))
    return failure();
  if (getVbox()) {
    // The output bound goes to stats[b, h, 4] and scales the eps_hat the
    // certificate left in stats[b, h, 0].
    if (!getStats())
      return emitOpError() << "'vbox' needs the 'stats' operand: the output "
                              "bound is written to stats[b, h, "
                           << static_cast<int64_t>(StatOutputBound) << "]";
    if (getStatsEpsAttr())
      return emitOpError() << "'vbox' (a certificate ran) and 'stats_eps' "
                              "(no certificate ran) are mutually exclusive";
    if (ShapedType::isDynamic(getVbox().getType().getDimSize(1)))
      return emitOpError() << "vbox must have a static key/value head count "
                              "(dimension 1)";
  }
  return success();
}

bool mlir::condensate::isStageOp(Operation *op) {
  return isa<ScorePagesOp, ScoreTokensOp, ScoreSketchOp, SelectTopKOp,
             PrecertifyOp, SparseAttendOp, DenseAttendOp, CertifyOp, MergeOp,
             AppendKVOp, PrefillAttentionOp>(op);
}
