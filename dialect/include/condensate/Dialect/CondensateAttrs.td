//===- CondensateAttrs.td - Policies, schedules, specs -----*- tablegen -*-===//
//
// Attributes that declare what a sparse decode attention computes: one
// layer's policy, a whole model's layer schedule, and the specialisation key
// that pins the shapes and types a kernel is generated for.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_ATTRS_TD
#define CONDENSATE_ATTRS_TD

include "condensate/Dialect/CondensateDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Condensate_Selector : I32EnumAttr<"Selector",
    "how the top-k part of a condensate set is chosen", [
      I32EnumAttrCase<"exact", 0>,
      I32EnumAttrCase<"block_minmax", 1>,
      I32EnumAttrCase<"block_mean", 2>,
      I32EnumAttrCase<"sketch", 3>
    ]> {
  let cppNamespace = "::mlir::condensate";
  let genSpecializedAttr = 0;
}

def Condensate_SelectorAttr
    : EnumAttr<Condensate_Dialect, Condensate_Selector, "selector">;

def Condensate_Granularity : I32EnumAttr<"Granularity",
    "the unit a selection ranks and keeps", [
      I32EnumAttrCase<"token", 0>,
      I32EnumAttrCase<"page", 1>
    ]> {
  let cppNamespace = "::mlir::condensate";
  let genSpecializedAttr = 0;
}

def Condensate_GranularityAttr
    : EnumAttr<Condensate_Dialect, Condensate_Granularity, "granularity">;

def Condensate_Target : I32EnumAttr<"Target",
    "the machine a specialised kernel is generated for", [
      I32EnumAttrCase<"cpu", 0>,
      I32EnumAttrCase<"sm_80", 80>,
      I32EnumAttrCase<"sm_90", 90>
    ]> {
  let cppNamespace = "::mlir::condensate";
  let genSpecializedAttr = 0;
}

def Condensate_TargetAttr
    : EnumAttr<Condensate_Dialect, Condensate_Target, "target">;

class Condensate_Attr<string name, string attrMnemonic,
                      list<Trait> traits = []>
    : AttrDef<Condensate_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// PolicyAttr
//===----------------------------------------------------------------------===//

def Condensate_PolicyAttr : Condensate_Attr<"Policy", "policy"> {
  let summary = "A sparse decode attention policy for one layer or head";
  let description = [{
    The condensate set of query position i (context length n = i + 1) is

        C = {0 .. anchor-1}  U  {n-W .. n-1}  U  TopK

    where W is the window and TopK holds the highest-scoring positions that
    are neither anchor nor window. `selector` says how TopK is chosen:
    - `exact`: the `topk` tokens with the largest q.k (reads every key);
    - `block_minmax`: the ceil(topk / page_size) pages with the largest upper
      bound s * sum_c max(q_c min_c, q_c max_c) from per-page key bounds;
    - `block_mean`: pages ranked by q . mean(K_page) (a heuristic);
    - `sketch`: the `topk` tokens with the largest upper bound on q.k from
      the page's key sketch (`bits` = 2, 4 or 8 bits a key channel, see
      AttentionABI.h): the dequantised sketch's dot product plus
      sum_c |q_c| (step_c / 2 + rounding); tokens of a page not yet full
      are bounded by the page box. Reads the sketches, not the keys.
    With grouped-query attention one selection serves the whole group: a
    unit's score is the maximum of its per-head scores over the group.

    `window_max` > `window` makes the window adaptive: the decoder supplies
    a per-sequence window W = window + (window_max - window) * RepScore.

    `tau` is the certificate tolerance: 0 means plain policy; tau > 0 means
    the omitted-mass bound eps_hat must be <= tau, which adds up to
    `max_extra` next-best pages (or tokens) and otherwise falls back to dense
    attention for that head group and step. tau = 2^-24 (5.9604645e-08) is
    the strict setting under which the excluded softmax mass is below one
    float32 ulp of 1.

    `output_bound = false` (certified policies only) drops the bound on the
    output error, ||o - o_S|| <= eps_hat * (distance from o_S to the far
    corner of the omitted values' box): the certificate then bounds the
    omitted mass alone and does not read the value box of the omitted pages
    (two summary rows a page; docs/CERTIFICATE.md, "Fixed reads"). Stats
    column 4 is then NaN.

    Example:

    ```mlir
    #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>
    #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 1024,
                       selector = block_minmax, page_size = 64, tau = 1.0e-4,
                       max_extra = 8>
    ```

    Omitted fields take their defaults: anchor = 1, window_max = window,
    topk = 0, selector = block_minmax, page_size = 16, tau = 0, max_extra = 0,
    bits = 4 with selector = sketch (and no bits otherwise), output_bound =
    true.
  }];
  let parameters = (ins
    "int64_t":$anchor,
    "int64_t":$window,
    "int64_t":$windowMax,
    "int64_t":$topk,
    "::mlir::condensate::Selector":$selector,
    "int64_t":$pageSize,
    "::llvm::APFloat":$tau,
    "int64_t":$maxExtra,
    "int64_t":$sketchBits,
    "bool":$outputBound
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True when the window is chosen per sequence at run time.
    bool isAdaptive() const { return getWindowMax() > getWindow(); }
    /// The unit the selection ranks: tokens for `exact` and `sketch`, pages
    /// otherwise.
    ::mlir::condensate::Granularity getGranularity() const;
    /// Number of units kept by top-k (pages round the budget up).
    int64_t getTopUnits() const;
    /// Tokens one kept unit covers.
    int64_t getUnitTokens() const;
    /// The largest number of positions the condensate set can hold.
    int64_t getBudget() const;
    double getTauValue() const { return getTau().convertToDouble(); }
    bool isCertified() const { return !getTau().isZero(); }
    /// True when the selection or the certificate needs unit scores.
    bool needsScores() const { return getTopk() > 0 || isCertified(); }
    /// True when the certificate takes the lower bounds of the extras it
    /// adds into Z (score_sketch's widths, certify's `widths`): a certified
    /// sketch policy with extras to walk. The runtime's mirror is
    /// condensate::Policy::extrasLowerBounds.
    bool takesExtrasLowerBounds() const {
      return isCertified() &&
             getSelector() == ::mlir::condensate::Selector::sketch &&
             getMaxExtra() > 0;
    }
  }];
}

//===----------------------------------------------------------------------===//
// DenseAttr
//===----------------------------------------------------------------------===//

def Condensate_DenseAttr : Condensate_Attr<"Dense", "dense"> {
  let summary = "Full attention over the whole context (a pillar layer)";
  let description = [{
    Marks a layer or head as dense: attention over every cached position.

    ```mlir
    #condensate.dense
    ```
  }];
}

//===----------------------------------------------------------------------===//
// RuleAttr
//===----------------------------------------------------------------------===//

def Condensate_RuleAttr : Condensate_Attr<"Rule", "rule"> {
  let summary = "Assigns a policy to a set of layers (and optionally heads)";
  let description = [{
    `layers` lists layer indices; `a to b` is the inclusive range a..b.
    `kv_heads`, when present, restricts the rule to those key/value heads
    (a per-head override: one selection serves a whole query-head group, so
    overrides are per key/value head). `policy` is a `#condensate.policy` or
    `#condensate.dense`.

    ```mlir
    #condensate.rule<layers = [0, 15], policy = #condensate.dense>
    #condensate.rule<layers = [2 to 7], kv_heads = [1],
                     policy = #condensate.policy<window = 1024>>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"int64_t">:$layers,
    ArrayRefParameter<"int64_t">:$kvHeads,
    "::mlir::Attribute":$policy
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool appliesTo(int64_t layer, int64_t kvHead) const;
  }];
}

//===----------------------------------------------------------------------===//
// ScheduleAttr
//===----------------------------------------------------------------------===//

def Condensate_ScheduleAttr : Condensate_Attr<"Schedule", "schedule"> {
  let summary = "A whole model's layer-adaptive attention configuration";
  let description = [{
    Gives every (layer, key/value head) a policy: `default` applies unless a
    rule covers the layer (and head); later rules override earlier ones.

    `depth = relative` says the rules describe positions in depth, written
    for a model of `layers` layers: applied to a model of another depth L,
    its layer l takes the policies of the schedule's layer at the same
    relative depth, floor((2l + 1) * layers / (2L)), and every layer a rule
    names also claims its nearest layer of the model, floor((2s + 1) * L /
    (2 * layers)), so no rule vanishes. Without it (`depth = fixed`, the
    default) a schedule whose rules name layers applies to its own depth
    only.

    The source paper's schedule for a 30-layer model (one pillar layer,
    |P|/L = 1/30 <= 1/16; wide fixed windows early; adaptive windows late):

    ```mlir
    #condensate.schedule<layers = 30,
      default = #condensate.policy<anchor = 1, window = 64, window_max = 256,
                                   topk = 32, selector = exact>,
      rules = [
        #condensate.rule<layers = [0 to 7],
                         policy = #condensate.policy<anchor = 1, window = 1024>>,
        #condensate.rule<layers = [15], policy = #condensate.dense>
      ]>
    ```
  }];
  let parameters = (ins
    "int64_t":$numLayers,
    "::mlir::Attribute":$defaultPolicy,
    ArrayRefParameter<"::mlir::condensate::RuleAttr">:$rules,
    "bool":$relativeDepth
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The policy (PolicyAttr or DenseAttr) of one layer and key/value head.
    ::mlir::Attribute getPolicy(int64_t layer, int64_t kvHead) const;
    /// The policy of every (layer, key/value head), layer-major: what
    /// getPolicy gives, in time proportional to the rules.
    ::llvm::SmallVector<::mlir::Attribute> resolve(int64_t numKVHeads) const;
    /// Layers whose every head is dense.
    ::llvm::SmallVector<int64_t> getPillarLayers(int64_t numKVHeads) const;
    /// Bits of the key sketches of its sketch policies (the verifier checks
    /// they agree); 0 when none uses sketches.
    int64_t getSketchBits() const;
  }];
}

//===----------------------------------------------------------------------===//
// SpecAttr
//===----------------------------------------------------------------------===//

def Condensate_SpecAttr : Condensate_Attr<"Spec", "spec"> {
  let summary = "The specialisation key a kernel is generated for";
  let description = [{
    Pins everything the code generator turns into constants: head dimension,
    query and key/value head counts (their ratio is the GQA group), page
    size, key/value storage type, the number of units top-k keeps, how many
    extra units the certificate may add, the number of KV splits the sparse
    attention is divided into, and the target.

    ```mlir
    #condensate.spec<head_dim = 64, q_heads = 9, kv_heads = 3,
                     page_size = 16, kv_type = f16, top_units = 2,
                     extra_units = 0, splits = 2, target = cpu>
    ```
  }];
  let parameters = (ins
    "int64_t":$head_dim,
    "int64_t":$q_heads,
    "int64_t":$kv_heads,
    "int64_t":$page_size,
    "::mlir::Type":$kv_type,
    "int64_t":$top_units,
    "int64_t":$extra_units,
    "int64_t":$splits,
    "::mlir::condensate::Target":$target
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getGroup() const { return getQHeads() / getKvHeads(); }
  }];
}

#endif // CONDENSATE_ATTRS_TD
