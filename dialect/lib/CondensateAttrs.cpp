//===- CondensateAttrs.cpp - policies, rules, schedules, specs ------------===//
//
// Parsing, printing and verification of the condensate attributes.
//
//===----------------------------------------------------------------------===//
#include "condensate/Dialect/CondensateDialect.h"
#include "condensate/ABI/Limits.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

using namespace mlir;
using namespace mlir::condensate;

#include "condensate/Dialect/CondensateEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "condensate/Dialect/CondensateAttrs.cpp.inc"

void CondensateDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "condensate/Dialect/CondensateAttrs.cpp.inc"
      >();
}

using ::condensate::abi::kStrictTau;
namespace limits = ::condensate::limits;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Parses `{ key = value (, key = value)* }` between `<` and `>`, calling
/// `parseValue(key)` for each key. Rejects duplicate and unknown keys.
static ParseResult
parseKeyValueList(AsmParser &parser, StringRef what,
                  ArrayRef<StringRef> allowed,
                  function_ref<ParseResult(StringRef)> parseValue) {
  if (parser.parseLess())
    return failure();
  llvm::StringSet<> seen;
  if (succeeded(parser.parseOptionalGreater()))
    return success();
  do {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return failure();
    if (!llvm::is_contained(allowed, key))
      return parser.emitError(loc)
             << "unknown " << what << " field '" << key
             << "'; expected one of: " << llvm::join(allowed, ", ");
    if (!seen.insert(key).second)
      return parser.emitError(loc)
             << "duplicate " << what << " field '" << key << "'";
    if (parser.parseEqual() || parseValue(key))
      return failure();
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseGreater();
}

/// Parses `[a, b to c, ...]` into an expanded list of non-negative integers.
static ParseResult parseIndexList(AsmParser &parser,
                                  SmallVectorImpl<int64_t> &out) {
  constexpr int64_t bound = limits::kMaxIndexEntries;
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        SMLoc loc = parser.getCurrentLocation();
        int64_t first;
        if (parser.parseInteger(first))
          return failure();
        int64_t last = first;
        if (succeeded(parser.parseOptionalKeyword("to"))) {
          if (parser.parseInteger(last))
            return failure();
          if (last < first)
            return parser.emitError(loc)
                   << "empty range " << first << " to " << last;
        }
        // Bounded before anything is expanded (so neither the loop below
        // nor the list can grow without limit).
        if (first < 0 || last >= bound)
          return parser.emitError(loc)
                 << "index " << (first < 0 ? first : last)
                 << " is out of bounds (indices are in [0, " << bound << "))";
        if (static_cast<int64_t>(out.size()) + (last - first + 1) > bound)
          return parser.emitError(loc)
                 << "the list names more than " << bound << " indices";
        for (int64_t i = first; i <= last; ++i)
          out.push_back(i);
        return success();
      });
}

/// Prints a list of integers, folding runs of three or more into `a to b`.
static void printIndexList(AsmPrinter &printer, ArrayRef<int64_t> values) {
  printer << "[";
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1)
      ++j;
    if (i != 0)
      printer << ", ";
    if (j - i >= 2) {
      printer << values[i] << " to " << values[j];
      i = j + 1;
    } else {
      printer << values[i];
      ++i;
    }
  }
  printer << "]";
}

static bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/// The shortest %e rendering of `v` that parses back to the same double.
static std::string formatRoundTrip(double v) {
  char buf[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

//===----------------------------------------------------------------------===//
// PolicyAttr
//===----------------------------------------------------------------------===//

Attribute PolicyAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t anchor = 1, window = 0, windowMax = 0, topk = 0, pageSize = 16,
          maxExtra = 0, bits = 0;
  bool haveWindow = false, haveWindowMax = false, haveBits = false;
  bool outputBound = true;
  double tau = 0.0;
  Selector selector = Selector::block_minmax;
  auto parseInt = [&](int64_t &v) { return parser.parseInteger(v); };
  static const StringRef allowed[] = {
      "anchor",    "window", "window_max", "topk", "selector",
      "page_size", "tau",    "max_extra",  "bits", "output_bound"};
  if (parseKeyValueList(
          parser, "policy", allowed, [&](StringRef key) -> ParseResult {
            if (key == "anchor")
              return parseInt(anchor);
            if (key == "window") {
              haveWindow = true;
              return parseInt(window);
            }
            if (key == "window_max") {
              haveWindowMax = true;
              return parseInt(windowMax);
            }
            if (key == "topk")
              return parseInt(topk);
            if (key == "page_size")
              return parseInt(pageSize);
            if (key == "max_extra")
              return parseInt(maxExtra);
            if (key == "bits") {
              haveBits = true;
              return parseInt(bits);
            }
            if (key == "output_bound") {
              SMLoc boolLoc = parser.getCurrentLocation();
              if (succeeded(parser.parseOptionalKeyword("true")))
                return success();
              if (succeeded(parser.parseOptionalKeyword("false"))) {
                outputBound = false;
                return success();
              }
              return parser.emitError(boolLoc)
                     << "policy output_bound must be true or false";
            }
            if (key == "tau") {
              if (succeeded(parser.parseOptionalKeyword("strict"))) {
                tau = kStrictTau;
                return success();
              }
              return parser.parseFloat(tau);
            }
            // selector
            SMLoc selLoc = parser.getCurrentLocation();
            StringRef name;
            if (parser.parseKeyword(&name))
              return failure();
            std::optional<Selector> sel = symbolizeSelector(name);
            if (!sel)
              return parser.emitError(selLoc)
                     << "unknown selector '" << name
                     << "'; expected exact, block_minmax, block_mean or "
                        "sketch";
            selector = *sel;
            return success();
          }))
    return {};
  if (!haveWindow) {
    parser.emitError(loc) << "#condensate.policy needs a 'window' field";
    return {};
  }
  if (!haveWindowMax)
    windowMax = window;
  if (!haveBits && selector == Selector::sketch)
    bits = 4;
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    anchor, window, windowMax, topk, selector, pageSize,
                    llvm::APFloat(tau), maxExtra, bits, outputBound);
}

void PolicyAttr::print(AsmPrinter &printer) const {
  printer << "<anchor = " << getAnchor() << ", window = " << getWindow();
  if (isAdaptive())
    printer << ", window_max = " << getWindowMax();
  if (getTopk() > 0)
    printer << ", topk = " << getTopk();
  if (getSelector() != Selector::block_minmax)
    printer << ", selector = " << stringifySelector(getSelector());
  if (getSelector() == Selector::sketch)
    printer << ", bits = " << getSketchBits();
  if (getPageSize() != 16)
    printer << ", page_size = " << getPageSize();
  if (isCertified()) {
    if (getTauValue() == kStrictTau)
      printer << ", tau = strict";
    else
      printer << ", tau = " << formatRoundTrip(getTauValue());
  }
  if (getMaxExtra() > 0)
    printer << ", max_extra = " << getMaxExtra();
  if (!getOutputBound())
    printer << ", output_bound = false";
  printer << ">";
}

LogicalResult PolicyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t anchor, int64_t window,
                                 int64_t windowMax, int64_t topk,
                                 Selector selector, int64_t pageSize,
                                 llvm::APFloat tau, int64_t maxExtra,
                                 int64_t sketchBits, bool outputBound) {
  if (anchor < 0)
    return emitError() << "policy anchor must be >= 0, got " << anchor;
  if (window < 0)
    return emitError() << "policy window must be >= 0, got " << window;
  if (windowMax < window)
    return emitError() << "policy window_max (" << windowMax
                       << ") must be >= window (" << window << ")";
  if (topk < 0)
    return emitError() << "policy topk must be >= 0, got " << topk;
  for (auto [name, v] : {std::pair<const char *, int64_t>{"anchor", anchor},
                         {"window_max", windowMax},
                         {"topk", topk}})
    if (v > limits::kMaxPolicyTokens)
      return emitError() << "policy " << name << " must be at most "
                         << limits::kMaxPolicyTokens << ", got " << v;
  if (anchor == 0 && windowMax == 0 && topk == 0)
    return emitError()
           << "policy attends to nothing: anchor, window and topk are all 0";
  if (!isPowerOfTwo(pageSize) || pageSize > 1024)
    return emitError() << "policy page_size must be a power of two in "
                          "[1, 1024], got "
                       << pageSize;
  double t = tau.convertToDouble();
  if (!(t >= 0.0 && t < 1.0))
    return emitError() << "policy tau must be in [0, 1), got " << t;
  if (maxExtra < 0)
    return emitError() << "policy max_extra must be >= 0, got " << maxExtra;
  bool tokens = selector == Selector::exact || selector == Selector::sketch;
  int64_t unit = tokens ? 1 : pageSize;
  if (maxExtra > limits::kMaxPolicyTokens / unit)
    return emitError() << "policy max_extra must be at most "
                       << limits::kMaxPolicyTokens / unit << " units ("
                       << limits::kMaxPolicyTokens << " tokens), got "
                       << maxExtra;
  if (maxExtra > 0 && t == 0.0)
    return emitError() << "policy max_extra = " << maxExtra
                       << " needs a certified policy (tau > 0)";
  if (selector == Selector::sketch && !::condensate::abi::validSketchBits(sketchBits))
    return emitError() << "policy bits of a sketch must be 2, 4 or 8, got "
                       << sketchBits;
  if (selector != Selector::sketch && sketchBits != 0)
    return emitError() << "policy bits = " << sketchBits
                       << " needs selector = sketch";
  if (!outputBound && t == 0.0)
    return emitError() << "policy output_bound = false needs a certified "
                          "policy (tau > 0)";
  return success();
}

Granularity PolicyAttr::getGranularity() const {
  return getSelector() == Selector::exact || getSelector() == Selector::sketch
             ? Granularity::token
             : Granularity::page;
}

int64_t PolicyAttr::getUnitTokens() const {
  return getGranularity() == Granularity::token ? 1 : getPageSize();
}

int64_t PolicyAttr::getTopUnits() const {
  int64_t unit = getUnitTokens();
  return (getTopk() + unit - 1) / unit;
}

int64_t PolicyAttr::getBudget() const {
  return getAnchor() + getWindowMax() +
         (getTopUnits() + getMaxExtra()) * getUnitTokens();
}

//===----------------------------------------------------------------------===//
// RuleAttr
//===----------------------------------------------------------------------===//

Attribute RuleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<int64_t> layers, kvHeads;
  Attribute policy;
  bool haveLayers = false, haveKVHeads = false;
  static const StringRef allowed[] = {"layers", "kv_heads", "policy"};
  if (parseKeyValueList(parser, "rule", allowed,
                        [&](StringRef key) -> ParseResult {
                          if (key == "layers") {
                            haveLayers = true;
                            return parseIndexList(parser, layers);
                          }
                          if (key == "kv_heads") {
                            haveKVHeads = true;
                            return parseIndexList(parser, kvHeads);
                          }
                          return parser.parseAttribute(policy);
                        }))
    return {};
  if (!haveLayers || !policy) {
    parser.emitError(loc)
        << "#condensate.rule needs both 'layers' and 'policy' fields";
    return {};
  }
  if (haveKVHeads && kvHeads.empty()) {
    parser.emitError(loc) << "#condensate.rule kv_heads must not be empty "
                             "(omit it to cover every head)";
    return {};
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), layers, kvHeads, policy);
}

void RuleAttr::print(AsmPrinter &printer) const {
  printer << "<layers = ";
  printIndexList(printer, getLayers());
  if (!getKvHeads().empty()) {
    printer << ", kv_heads = ";
    printIndexList(printer, getKvHeads());
  }
  printer << ", policy = ";
  printer.printAttribute(getPolicy());
  printer << ">";
}

LogicalResult RuleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<int64_t> layers,
                               ArrayRef<int64_t> kvHeads, Attribute policy) {
  if (layers.empty())
    return emitError() << "rule must name at least one layer";
  constexpr int64_t bound = limits::kMaxIndexEntries;
  if (static_cast<int64_t>(layers.size()) > bound ||
      static_cast<int64_t>(kvHeads.size()) > bound)
    return emitError() << "rule names more than " << bound << " indices";
  for (int64_t l : layers)
    if (l < 0 || l >= limits::kMaxLayers)
      return emitError() << "rule layer index must be in [0, "
                         << limits::kMaxLayers << "), got " << l;
  for (int64_t h : kvHeads)
    if (h < 0 || h >= limits::kMaxHeads)
      return emitError() << "rule kv_head index must be in [0, "
                         << limits::kMaxHeads << "), got " << h;
  if (!isPolicyLike(policy))
    return emitError() << "rule policy must be #condensate.policy or "
                          "#condensate.dense, got "
                       << policy;
  return success();
}

bool RuleAttr::appliesTo(int64_t layer, int64_t kvHead) const {
  if (!llvm::is_contained(getLayers(), layer))
    return false;
  return getKvHeads().empty() || llvm::is_contained(getKvHeads(), kvHead);
}

//===----------------------------------------------------------------------===//
// ScheduleAttr
//===----------------------------------------------------------------------===//

Attribute ScheduleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t numLayers = 0;
  bool haveLayers = false, relative = false;
  Attribute defaultPolicy;
  SmallVector<RuleAttr> rules;
  static const StringRef allowed[] = {"layers", "depth", "default", "rules"};
  if (parseKeyValueList(
          parser, "schedule", allowed, [&](StringRef key) -> ParseResult {
            if (key == "layers") {
              haveLayers = true;
              return parser.parseInteger(numLayers);
            }
            if (key == "depth") {
              SMLoc at = parser.getCurrentLocation();
              StringRef mode;
              if (parser.parseKeyword(&mode))
                return failure();
              if (mode != "relative" && mode != "fixed")
                return parser.emitError(at)
                       << "schedule depth must be 'relative' or 'fixed', got '"
                       << mode << "'";
              relative = mode == "relative";
              return success();
            }
            if (key == "default")
              return parser.parseAttribute(defaultPolicy);
            return parser.parseCommaSeparatedList(
                AsmParser::Delimiter::Square, [&]() -> ParseResult {
                  SMLoc ruleLoc = parser.getCurrentLocation();
                  Attribute rule;
                  if (parser.parseAttribute(rule))
                    return failure();
                  auto typed = dyn_cast<RuleAttr>(rule);
                  if (!typed)
                    return parser.emitError(ruleLoc)
                           << "expected #condensate.rule, got " << rule;
                  rules.push_back(typed);
                  return success();
                });
          }))
    return {};
  if (!haveLayers || !defaultPolicy) {
    parser.emitError(loc)
        << "#condensate.schedule needs 'layers' and 'default' fields";
    return {};
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), numLayers, defaultPolicy, rules,
                    relative);
}

void ScheduleAttr::print(AsmPrinter &printer) const {
  printer << "<layers = " << getNumLayers();
  if (getRelativeDepth())
    printer << ", depth = relative";
  printer << ", default = ";
  printer.printAttribute(getDefaultPolicy());
  printer << ", rules = [";
  llvm::interleaveComma(getRules(), printer,
                        [&](RuleAttr r) { printer.printAttribute(r); });
  printer << "]>";
}

LogicalResult
ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t numLayers, Attribute defaultPolicy,
                     ArrayRef<RuleAttr> rules, bool) {
  if (numLayers <= 0 || numLayers > limits::kMaxLayers)
    return emitError() << "schedule layers must be in [1, "
                       << limits::kMaxLayers << "], got " << numLayers;
  if (static_cast<int64_t>(rules.size()) > limits::kMaxRules)
    return emitError() << "schedule has " << rules.size()
                       << " rules, more than " << limits::kMaxRules;
  if (!isPolicyLike(defaultPolicy))
    return emitError() << "schedule default must be #condensate.policy or "
                          "#condensate.dense, got "
                       << defaultPolicy;
  for (auto [i, rule] : llvm::enumerate(rules))
    for (int64_t l : rule.getLayers())
      if (l >= numLayers)
        return emitError() << "schedule rule " << i << " names layer " << l
                           << " but the schedule has " << numLayers
                           << " layers";
  // One sketch width a model: the summaries of every layer carry its rows.
  int64_t bits = 0;
  auto sameBits = [&](Attribute policy) {
    auto p = dyn_cast<PolicyAttr>(policy);
    if (!p || p.getSelector() != Selector::sketch)
      return true;
    if (bits != 0 && p.getSketchBits() != bits)
      return false;
    bits = p.getSketchBits();
    return true;
  };
  bool same = sameBits(defaultPolicy);
  for (RuleAttr rule : rules)
    same = same && sameBits(rule.getPolicy());
  if (!same)
    return emitError() << "sketch policies of one schedule must use the "
                          "same bits";
  return success();
}

int64_t ScheduleAttr::getSketchBits() const {
  auto bitsOf = [](Attribute policy) -> int64_t {
    auto p = dyn_cast<PolicyAttr>(policy);
    return p && p.getSelector() == Selector::sketch ? p.getSketchBits() : 0;
  };
  if (int64_t b = bitsOf(getDefaultPolicy()))
    return b;
  for (RuleAttr rule : getRules())
    if (int64_t b = bitsOf(rule.getPolicy()))
      return b;
  return 0;
}

Attribute ScheduleAttr::getPolicy(int64_t layer, int64_t kvHead) const {
  Attribute result = getDefaultPolicy();
  for (RuleAttr rule : getRules())
    if (rule.appliesTo(layer, kvHead))
      result = rule.getPolicy();
  return result;
}

SmallVector<Attribute> ScheduleAttr::resolve(int64_t numKVHeads) const {
  // Rules in order, each overwriting the heads it names of the layers it
  // names: time proportional to the rules' text plus the result.
  int64_t layers = getNumLayers();
  SmallVector<Attribute> out(layers * numKVHeads, getDefaultPolicy());
  for (RuleAttr rule : getRules())
    for (int64_t l : rule.getLayers()) {
      if (l < 0 || l >= layers)
        continue;
      if (rule.getKvHeads().empty()) {
        for (int64_t h = 0; h < numKVHeads; ++h)
          out[l * numKVHeads + h] = rule.getPolicy();
        continue;
      }
      for (int64_t h : rule.getKvHeads())
        if (h >= 0 && h < numKVHeads)
          out[l * numKVHeads + h] = rule.getPolicy();
    }
  return out;
}

SmallVector<int64_t> ScheduleAttr::getPillarLayers(int64_t numKVHeads) const {
  SmallVector<Attribute> policies = resolve(numKVHeads);
  SmallVector<int64_t> pillars;
  for (int64_t l = 0; l < getNumLayers(); ++l) {
    bool allDense = true;
    for (int64_t h = 0; h < numKVHeads && allDense; ++h)
      allDense = isa<DenseAttr>(policies[l * numKVHeads + h]);
    if (allDense)
      pillars.push_back(l);
  }
  return pillars;
}

//===----------------------------------------------------------------------===//
// SpecAttr
//===----------------------------------------------------------------------===//

LogicalResult SpecAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t headDim, int64_t qHeads,
                               int64_t kvHeads, int64_t pageSize, Type kvType,
                               int64_t topUnits, int64_t extraUnits,
                               int64_t splits, Target target) {
  if (headDim <= 0 || headDim % 8 != 0 || headDim > 512)
    return emitError() << "spec head_dim must be a positive multiple of 8 "
                          "up to 512, got "
                       << headDim;
  if (qHeads <= 0 || kvHeads <= 0)
    return emitError() << "spec head counts must be > 0, got q_heads = "
                       << qHeads << ", kv_heads = " << kvHeads;
  if (qHeads % kvHeads != 0)
    return emitError() << "spec q_heads (" << qHeads
                       << ") must be a multiple of kv_heads (" << kvHeads
                       << ")";
  if (!isPowerOfTwo(pageSize) || pageSize > 1024)
    return emitError() << "spec page_size must be a power of two in "
                          "[1, 1024], got "
                       << pageSize;
  if (!kvType.isF32() && !kvType.isF16() && !kvType.isBF16())
    return emitError() << "spec kv_type must be f32, f16 or bf16, got "
                       << kvType;
  if (topUnits < 0 || extraUnits < 0)
    return emitError() << "spec top_units and extra_units must be >= 0";
  if (splits <= 0 || splits > limits::kMaxSplits)
    return emitError() << "spec splits must be in [1, " << limits::kMaxSplits
                       << "], got " << splits;
  (void)target;
  return success();
}
