//===- CondensateOps.td - condensate operations ------------*- tablegen -*-===//
//
// The model-level op, the high-level decode attention and append ops, and the
// stages decode attention decomposes into. All ops work on memrefs in
// destination-passing style: outputs are operands the op writes.
//
// Shapes (B = batch, Hq/Hkv = query/key-value heads, D = head_dim, P = page
// size, NP = pages in the pool, MP = pages per sequence):
//   q, out       memref<B x Hq x D x f32>
//   k/v cache    memref<NP x Hkv x P x D x T>     T in {f32, f16, bf16}
//   page table   memref<B x MP x i32>             page of the j-th P tokens
//   lens         memref<B x i32>                  context length incl. query
//   windows      memref<B x i32>                  per-sequence window
//   summaries    memref<NP x Hkv x 5 x D x f32>   kmin,kmax,ksum,vmin,vmax
//   stats        memref<B x Hq x 5 x f32>         eps_hat, keys, extra, dense,
//                                                 output-error bound
//   vbox         memref<B x Hkv x 2 x D x f32>    min, max of omitted values
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_OPS_TD
#define CONDENSATE_OPS_TD

include "condensate/Dialect/CondensateAttrs.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Condensate_Op<string mnemonic, list<Trait> traits = []>
    : Op<Condensate_Dialect, mnemonic, traits>;

def Condensate_F32Buffer : MemRefOf<[F32]>;
def Condensate_I32Buffer : MemRefOf<[I32]>;
def Condensate_KVBuffer : MemRefRankOf<[F32, F16, BF16], [4]>;

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

def Condensate_ModelOp : Condensate_Op<"model", [Symbol]> {
  let summary = "A model's attention shape and layer schedule";
  let description = [{
    Declares the attention configuration of a whole decoder: layer count,
    query and key/value heads, head dimension, KV-cache page size and storage
    type, softmax scale (default 1/sqrt(head_dim)), the bits of the key
    sketches the cache's summaries carry (`sketch_bits`, default: those of
    the schedule's sketch policies, or none) and the layer schedule.
    `condensate-expand-schedule` turns it into one function per distinct
    layer policy and an entry of the module's `condensate.layer_tables`.

    ```mlir
    condensate.model @smollm2 layers = 30, q_heads = 9, kv_heads = 3, head_dim = 64,
        page_size = 16, kv_type = f32,
        schedule = #condensate.schedule<layers = 30,
                     default = #condensate.policy<window = 64, topk = 32,
                                                  selector = exact>,
                     rules = []>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    I64Attr:$num_layers,
    I64Attr:$num_q_heads,
    I64Attr:$num_kv_heads,
    I64Attr:$head_dim,
    I64Attr:$page_size,
    TypeAttr:$kv_type,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<I64Attr>:$sketch_bits,
    Condensate_ScheduleAttr:$schedule
  );
  let assemblyFormat = [{
    $sym_name `layers` `=` $num_layers `,` `q_heads` `=` $num_q_heads `,`
    `kv_heads` `=` $num_kv_heads `,` `head_dim` `=` $head_dim `,` `page_size` `=` $page_size
    `,` `kv_type` `=` $kv_type `,` (`scale` `=` $scale^ `,`)?
    (`sketch_bits` `=` $sketch_bits^ `,`)? `schedule` `=` $schedule attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    float getScaleOrDefault();
    /// Bits of the key sketches in the cache's summaries (0: none).
    int64_t getCacheSketchBits();
  }];
}

//===----------------------------------------------------------------------===//
// DecodeAttentionOp
//===----------------------------------------------------------------------===//

def Condensate_DecodeAttentionOp : Condensate_Op<"decode_attention",
    [AttrSizedOperandSegments, AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "One decode step of (sparse) attention for one layer";
  let description = [{
    For every sequence b and query head h, attends q[b, h] to the condensate
    set of the paged cache under `policy` (`#condensate.policy` or
    `#condensate.dense`) and writes softmax(scale * q.K_C) V_C to out[b, h].
    Query head h uses key/value head h / (Hq / Hkv). Position n-1 (n =
    lens[b]) is the query's own, already appended.

    `head_policies`, when present, gives one policy per key/value head and
    overrides `policy` for that head. `windows` carries the per-sequence
    window of adaptive policies (clamped to [window, window_max]).
    `summaries` is required by the block selectors and the certificate.
    `stats`, when present, receives per query head: the certificate bound
    eps_hat on the omitted softmax mass, positions attended, extra units
    added, 1 when the step fell back to dense attention, and the bound
    ||o_dense - o||_2 <= eps_hat * sqrt(sum_c max(Vmax_c - o_c, o_c -
    Vmin_c, 0)^2) on the error of the written output o, with [Vmin, Vmax]
    the per-channel box of the omitted values (from the page summaries;
    see `condensate.certify` and `condensate.merge`). Both bounds are 0 for
    dense attention and after a dense fallback and NaN when not computed
    (uncertified sparse policies; the output bound also without
    `summaries`).

    ```mlir
    condensate.decode_attention
        q(%q : memref<?x9x64xf32>) kv(%k, %v : memref<?x3x16x64xf16>)
        pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>)
        windows(%w : memref<?xi32>) summaries(%s : memref<?x3x5x64xf32>)
        out(%o : memref<?x9x64xf32>) stats(%st : memref<?x9x5xf32>)
        {policy = #condensate.policy<window = 64, topk = 32>, scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_KVBuffer:$v_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$windows,
    Optional<Condensate_F32Buffer>:$summaries,
    Condensate_F32Buffer:$out,
    Optional<Condensate_F32Buffer>:$stats,
    AnyAttr:$policy,
    OptionalAttr<ArrayAttr>:$head_policies,
    F32Attr:$scale,
    OptionalAttr<Condensate_SpecAttr>:$spec
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $k_cache `,` $v_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    (`windows` `(` $windows^ `:` type($windows) `)`)?
    (`summaries` `(` $summaries^ `:` type($summaries) `)`)?
    `out` `(` $out `:` type($out) `)`
    (`stats` `(` $stats^ `:` type($stats) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The policy of key/value head `kvHead` (PolicyAttr or DenseAttr).
    ::mlir::Attribute getPolicyForHead(int64_t kvHead);
  }];
}

//===----------------------------------------------------------------------===//
// AppendKVOp
//===----------------------------------------------------------------------===//

def Condensate_AppendKVOp : Condensate_Op<"append_kv",
    [AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Writes rows of keys and values into the paged KV cache";
  let description = [{
    Stores k_new[b] and v_new[b] (memref<B x Hkv x D x f32>, converted to
    the cache type) at position positions[b] of the sequence whose page
    table is row b, and updates that page's summaries: key min/max/sum and
    value min/max per channel, taken over the values as stored (after
    conversion). The first token of a page resets its summaries. Rows are
    appended in order: a row is one decoding sequence's new token, or one
    of a prefill's tokens, and rows that land in one page must be
    consecutive, in position order (a decode batch's one row per sequence
    is; so is a prefill's run of positions); the GPU gives each such run
    to one block. O(Hkv * D) work per row. With `sketch_bits`
    (2, 4 or 8) the summaries carry key sketches (AttentionABI.h): the token
    that fills a page also quantises the page's keys against its final key
    box, O(P * Hkv * D) work once per page.

    ```mlir
    condensate.append_kv k(%kn : memref<?x3x64xf32>) v(%vn : memref<?x3x64xf32>)
        into(%k, %v : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        positions(%pos : memref<?xi32>) summaries(%s : memref<?x3x5x64xf32>)
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$k_new,
    Condensate_F32Buffer:$v_new,
    Condensate_KVBuffer:$k_cache,
    Condensate_KVBuffer:$v_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$positions,
    Optional<Condensate_F32Buffer>:$summaries,
    DefaultValuedAttr<I64Attr, "0">:$sketch_bits
  );
  let assemblyFormat = [{
    `k` `(` $k_new `:` type($k_new) `)` `v` `(` $v_new `:` type($v_new) `)`
    `into` `(` $k_cache `,` $v_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `positions` `(` $positions `:` type($positions) `)`
    (`summaries` `(` $summaries^ `:` type($summaries) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// PrefillAttentionOp
//===----------------------------------------------------------------------===//

def Condensate_PrefillAttentionOp : Condensate_Op<"prefill_attention",
    [AllTypesMatch<["k_cache", "v_cache"]>, AllTypesMatch<["q", "out"]>]> {
  let summary = "Causal attention of a prompt's rows over the paged cache";
  let description = [{
    Chunked prefill: q holds R query rows (memref<R x Hq x D x f32>), those
    of sequence s being rows [row_starts[s], row_starts[s + 1]) (S = the
    size of `lens`, row_starts has S + 1 entries, row_starts[0] = 0 and
    row_starts[S] = R). Their keys and values are already in the cache:
    with c rows, row r of sequence s is the query at position
    p = lens[s] - c + (r - row_starts[s]) and attends causally to the
    positions t <= p of sequence s through page_table[s]; with `window`
    W > 0 only to t > p - W and the first `anchor` positions (a sliding
    window layer). out[r, h] = softmax(scale * q[r, h] . K) V, query head h
    using key/value head h / (Hq / Hkv).

    It lowers to a flash-attention kernel on the GPU (a block per tile of
    rows and key/value head: the tile's queries stay in shared memory while
    key/value tiles stream through it once) and to loops on the CPU; both
    keep online-softmax state in float32. A layer's prefill attends as the
    layer's policy would were it applied to every prompt row: in its window
    for a static window policy, densely otherwise
    (`condensate-expand-schedule`).

    ```mlir
    condensate.prefill_attention q(%q : memref<?x9x64xf32>)
        kv(%k, %v : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>)
        out(%o : memref<?x9x64xf32>) {scale = 0.125 : f32, window = 512}
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_KVBuffer:$v_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Condensate_I32Buffer:$row_starts,
    Condensate_F32Buffer:$out,
    F32Attr:$scale,
    DefaultValuedAttr<I64Attr, "0">:$window,
    DefaultValuedAttr<I64Attr, "0">:$anchor
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $k_cache `,` $v_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `rows` `(` $row_starts `:` type($row_starts) `)`
    `out` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Stages
//===----------------------------------------------------------------------===//

def Condensate_ScorePagesOp : Condensate_Op<"score_pages"> {
  let summary = "Scores every page of every sequence from its key summary";
  let description = [{
    scores[b, h, j] for page slot j < ceil(lens[b] / P) is, for query head h:
    - `block_minmax`: scale * sum_c max(q_c * kmin_c, q_c * kmax_c), an upper
      bound on every logit in the page;
    - `block_mean`: scale * q . (ksum / n_j), the logit of the page mean.
    Slots past the sequence's last page are not read by select_topk or
    certify (they stop at the context) and are left unspecified: a kernel
    need not write them, so scoring costs the context, not the page table's
    width. Reads 2 (or 1) vectors of D floats per page and key/value head.

    ```mlir
    condensate.score_pages block_minmax q(%q : memref<?x9x64xf32>)
        summaries(%s : memref<?x3x5x64xf32>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>) scores(%sc : memref<?x9x?xf32>)
        {page_size = 16 : i64, scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_SelectorAttr:$selector,
    Condensate_F32Buffer:$q,
    Condensate_F32Buffer:$summaries,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Condensate_F32Buffer:$scores,
    I64Attr:$page_size,
    F32Attr:$scale
  );
  let assemblyFormat = [{
    $selector `q` `(` $q `:` type($q) `)`
    `summaries` `(` $summaries `:` type($summaries) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `scores` `(` $scores `:` type($scores) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Condensate_ScoreTokensOp : Condensate_Op<"score_tokens"> {
  let summary = "Exact logits of every cached token";
  let description = [{
    scores[b, h, t] = scale * q[b, h] . k[t] for t < lens[b]; slots past it
    are unspecified (as for score_pages). With one row per key/value head
    (scores of Hkv rows), scores[b, g, t] is the max over g's query heads:
    what select_topk ranks by, in 1/G of the bytes (the certificate needs
    every head's row).
    The `exact` selector's scoring: it reads every key.

    ```mlir
    condensate.score_tokens q(%q : memref<?x9x64xf32>)
        k(%k : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>) scores(%sc : memref<?x9x?xf32>)
        {scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Condensate_F32Buffer:$scores,
    F32Attr:$scale
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)` `k` `(` $k_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `scores` `(` $scores `:` type($scores) `)` attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `scores` holds one row per key/value head (the max over its
    /// group's query heads) rather than one per query head.
    bool scoresPerGroup();
  }];
}

def Condensate_ScoreSketchOp : Condensate_Op<"score_sketch"> {
  let summary = "Upper bounds on every cached token's logit from key sketches";
  let description = [{
    scores[b, h, t] for t < lens[b] is an upper bound on scale * q[b, h] .
    k[t], from the summaries alone: for a full page, the dot product of q
    with the dequantised sketch KMin_c + code_tc * step_c plus the slack
    sum_c |q_c| e_c + gamma * sum_c |q_c| m_c, where e_c bounds the
    quantisation and rounding error of a channel and gamma * m_c the float
    rounding of the sums (AttentionABI.h: sketchChannelError, sketchGamma,
    sketchMagnitude; the derivation in codegen's Common/Sketch.h); for a
    page not yet full (no sketch), the page box bound of block_minmax.
    Slots past lens[b] are unspecified (as for score_pages). With one row
    per key/value head, scores[b, g, t] is the max over g's query heads (as
    for score_tokens). The `sketch` selector's scoring: it reads the page's
    box rows and sketchRows(P, bits) rows of words, never the keys.

    With `widths` (scores of one row per query head), it also writes each
    page's interval width: widths[b, h, j] = 2 * scale * (sum_c |q_c| e_c +
    gamma * sum_c |q_c| m_c), twice the slack, for a full page j, so that
    scores[b, h, t] - widths[b, h, t / page_size] is a lower bound on the
    logit of token t up to the float32 rounding of that difference and of
    the scores (which `certify`'s margin covers); +inf for a page not yet
    full (its box bound gives no lower bound here). The certificate takes
    the extras' lower bounds into Z with it (docs/CERTIFICATE.md). Pages
    past the context are unspecified.

    ```mlir
    condensate.score_sketch q(%q : memref<?x9x64xf32>)
        summaries(%s : memref<?x3x7x64xf32>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>) scores(%sc : memref<?x9x?xf32>)
        widths(%w : memref<?x9x?xf32>)
        {page_size = 16 : i64, bits = 4 : i64, scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$q,
    Condensate_F32Buffer:$summaries,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Condensate_F32Buffer:$scores,
    Optional<Condensate_F32Buffer>:$widths,
    I64Attr:$page_size,
    I64Attr:$bits,
    F32Attr:$scale
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `summaries` `(` $summaries `:` type($summaries) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    `scores` `(` $scores `:` type($scores) `)`
    (`widths` `(` $widths^ `:` type($widths) `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `scores` holds one row per key/value head (the max over its
    /// group's query heads) rather than one per query head.
    bool scoresPerGroup();
  }];
}

def Condensate_SelectTopKOp : Condensate_Op<"select_topk"> {
  let summary = "Picks the highest-scoring units outside anchor and window";
  let description = [{
    For each sequence b and key/value head g, ranks candidate units u by
    max over the group's query heads of scores[b, h, u] (ties: lower unit
    first); scores of one row per key/value head hold that max already.
    With token units and a row per query head (what the certificate
    takes), each head's score is first less that head's largest over the
    forced positions (anchor and window; 0 where not finite), so that one
    head's high scores do not rank the whole group (docs/CERTIFICATE.md). indices[b, g, 0 .. base) receives the `base` best units in
    increasing unit order (a set: attention order does not matter, and
    increasing order reads the cache sequentially); the remaining slots
    receive the next best units in ranking order (the certificate adds them
    in that order). Slots without a candidate get -1. A unit is a candidate
    when it holds at least one position that is neither anchor (< anchor)
    nor window (>= n - W) nor past the context. W is windows[b] clamped to
    [window, window_max] when `windows` is given, else `window`.
    Selection is a radix search for the base-th largest score over
    order-preserving integer keys (8 bits a counting pass, no sort); how
    each target orders the extras is its lowering's choice.

    ```mlir
    condensate.select_topk page scores(%sc : memref<?x9x?xf32>)
        lens(%len : memref<?xi32>) indices(%idx : memref<?x3x4xi32>)
        {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
         page_size = 16 : i64, base = 4 : i64}
    ```
  }];
  let arguments = (ins
    Condensate_GranularityAttr:$granularity,
    Condensate_F32Buffer:$scores,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$windows,
    Condensate_I32Buffer:$indices,
    I64Attr:$anchor,
    I64Attr:$window,
    I64Attr:$window_max,
    I64Attr:$page_size,
    I64Attr:$base
  );
  let assemblyFormat = [{
    $granularity `scores` `(` $scores `:` type($scores) `)`
    `lens` `(` $lens `:` type($lens) `)`
    (`windows` `(` $windows^ `:` type($windows) `)`)?
    `indices` `(` $indices `:` type($indices) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Condensate_SparseAttendOp : Condensate_Op<"sparse_attend",
    [AttrSizedOperandSegments, AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Online-softmax partials over a condensate set, split S ways";
  let description = [{
    Enumerates the condensate set of (b, g) as a virtual list: `anchor`
    anchor slots, `window_max` window slots (the first window_max - W masked),
    then the units indices[b, g, first .. first+count) (count limited per
    (b, g) by `limits` when given). Positions that fall past the context, or
    into anchor/window when reached through a unit, are masked, so each
    position is attended at most once. `include_forced = false` drops the
    anchor and window slots (used for the certificate's extra units). With
    `skip`, groups with skip[b, g] != 0 attend nothing (their partials are
    empty): the groups the certificate's early test sent to dense.
    The list is cut into `splits` equal chunks; for chunk s and query head h
    it writes m = max logit, l = sum exp(logit - m), c = positions attended
    to partial_ml[b, h, s] and sum exp(logit - m) v to partial_o[b, h, s].

    ```mlir
    condensate.sparse_attend page q(%q : memref<?x9x64xf32>)
        kv(%k, %v : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>) indices(%idx : memref<?x3x4xi32>)
        partials(%po, %pml : memref<?x9x2x64xf32>, memref<?x9x2x3xf32>)
        {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
         first = 0 : i64, count = 4 : i64, include_forced = true,
         scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_GranularityAttr:$granularity,
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_KVBuffer:$v_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$windows,
    Optional<Condensate_I32Buffer>:$indices,
    Optional<Condensate_I32Buffer>:$limits,
    Optional<Condensate_I32Buffer>:$skip,
    Condensate_F32Buffer:$partial_o,
    Condensate_F32Buffer:$partial_ml,
    I64Attr:$anchor,
    I64Attr:$window,
    I64Attr:$window_max,
    I64Attr:$first,
    I64Attr:$count,
    BoolAttr:$include_forced,
    F32Attr:$scale
  );
  let assemblyFormat = [{
    $granularity `q` `(` $q `:` type($q) `)`
    `kv` `(` $k_cache `,` $v_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    (`windows` `(` $windows^ `:` type($windows) `)`)?
    (`indices` `(` $indices^ `:` type($indices) `)`)?
    (`limits` `(` $limits^ `:` type($limits) `)`)?
    (`skip` `(` $skip^ `:` type($skip) `)`)?
    `partials` `(` $partial_o `,` $partial_ml `:` type($partial_o) `,`
    type($partial_ml) `)` attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumSplits();
    /// Length of the virtual list: anchor + window_max + count * unit.
    int64_t getVirtualLength();
  }];
}

def Condensate_DenseAttendOp : Condensate_Op<"dense_attend",
    [AllTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "Online-softmax partials over the whole context, split S ways";
  let description = [{
    Flash-decoding: positions [0, n) of sequence b are cut into S' equal
    chunks of ceil(n / S') tokens, S' at most S, the splits launched (the
    partials' static split dimension, or fewer where a GPU launch's batch
    and kv heads fill the chip), and fewer for a short context, whose
    chunks keep a smallest size the lowering chooses per target
    (denseSplitRange, codegen/lib/Common/Numerics.h); chunks s >= S' are
    empty;
    chunk s of (b, h) writes (m, l, c) to partial_ml[b, h, s] and the
    unnormalised output to partial_o[b, h, s]. Chunks past the context write
    m = -inf, l = 0, c = 0. With `mask`, only key/value heads g with
    mask[b, g] != 0 are computed; the others write empty partials.

    ```mlir
    condensate.dense_attend q(%q : memref<?x9x64xf32>)
        kv(%k, %v : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        lens(%len : memref<?xi32>)
        partials(%po, %pml : memref<?x9x4x64xf32>, memref<?x9x4x3xf32>)
        {scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_KVBuffer:$v_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$mask,
    Condensate_F32Buffer:$partial_o,
    Condensate_F32Buffer:$partial_ml,
    F32Attr:$scale
  );
  let assemblyFormat = [{
    `q` `(` $q `:` type($q) `)`
    `kv` `(` $k_cache `,` $v_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `lens` `(` $lens `:` type($lens) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `partials` `(` $partial_o `,` $partial_ml `:` type($partial_o) `,`
    type($partial_ml) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Condensate_PrecertifyOp : Condensate_Op<"precertify"> {
  let summary = "The certificate's early test: dense before attention when it must fail";
  let description = [{
    Decides, before any attention, which groups a certify op with the same
    set and tolerance cannot pass, from the bounds alone. For (b, query
    head h) with M the largest bound of the base set (bounds[b, h, u] over
    the base units and the units of the anchor and window positions):

        Zhat = sum over anchor and window positions t of exp(l_t - M)
             + sum over base units u of n_u exp(bound_u - M)
        Ulow = sum over candidate units ranked after every slot of
               indices[b, g] of n_u exp(bound_u - M)
        eps_low = Ulow / (Zhat + Ulow)

    with l_t the exact logit scale * q.k_t (read from the cache: anchor and
    window only) and each term taken with the certificate's margin
    (unitMassBound). Every logit of the base set is at most its term's, so
    Zhat >= the certificate's Z_S; every unit the certificate can leave out
    after all max_extra extras is in Ulow (ranked by `scores` as
    select_topk ranks them, ties to the lower unit), so eps_low <= every
    eps_hat the
    certificate can reach. When the group's worst head has eps_low > tau,
    early[b, g] = 1 (the certificate would fail): the group skips its
    sparse pass and goes dense. Otherwise early[b, g] = 0. An omitted
    bound that overflows Ulow makes eps_low 1 (early: the certificate fails
    on it too); sums that are NaN make it 0 (the certificate decides).
    Without a free slot (fewer candidates than slots) nothing can be left
    out and early is 0.

    With `extras_in_z` (for a certify op with `widths`, which takes the
    lower bounds of the extras it adds into Z), Zhat also holds n_u
    exp(bound_u - M) of every unit in an extras slot (indices[b, g, base ..
    K)): each extra's lower bound is at most its bound, so Zhat stays at
    least every Z that certify can reach.

    ```mlir
    condensate.precertify token q(%q : memref<?x9x64xf32>)
        k(%k : memref<?x3x16x64xf16>) pages(%pt : memref<?x?xi32>)
        scores(%sc : memref<?x9x?xf32>) bounds(%sc : memref<?x9x?xf32>)
        lens(%len : memref<?xi32>) indices(%idx : memref<?x3x704xi32>)
        early(%e : memref<?x3xi32>)
        {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
         page_size = 16 : i64, base_units = 192 : i64, tau = 1.0e-02 : f64,
         scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins
    Condensate_GranularityAttr:$granularity,
    Condensate_F32Buffer:$q,
    Condensate_KVBuffer:$k_cache,
    Condensate_I32Buffer:$page_table,
    Condensate_F32Buffer:$scores,
    Condensate_F32Buffer:$bounds,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$windows,
    Condensate_I32Buffer:$indices,
    Condensate_I32Buffer:$early,
    I64Attr:$anchor,
    I64Attr:$window,
    I64Attr:$window_max,
    I64Attr:$page_size,
    I64Attr:$base_units,
    F64Attr:$tau,
    F32Attr:$scale,
    UnitAttr:$extras_in_z
  );
  let assemblyFormat = [{
    $granularity `q` `(` $q `:` type($q) `)`
    `k` `(` $k_cache `:` type($k_cache) `)`
    `pages` `(` $page_table `:` type($page_table) `)`
    `scores` `(` $scores `:` type($scores) `)`
    `bounds` `(` $bounds `:` type($bounds) `)`
    `lens` `(` $lens `:` type($lens) `)`
    (`windows` `(` $windows^ `:` type($windows) `)`)?
    `indices` `(` $indices `:` type($indices) `)`
    `early` `(` $early `:` type($early) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Condensate_CertifyOp : Condensate_Op<"certify",
    [AttrSizedOperandSegments]> {
  let summary = "Bounds the omitted softmax mass; picks extra units or dense";
  let description = [{
    For each (b, query head h): merges the base partials into m and Z_S,
    then bounds the mass of every candidate unit u that the base set left
    out by n_u * exp(score[b, h, u] - m) (n_u: positions of u not in anchor
    or window; for tokens the score is the exact logit, so the bound is
    exact). eps_hat = U / (Z_S + U) with U the sum of those terms.

    When tau > 0 and the worst head of a group exceeds tau, the group adds
    the next units indices[b, g, base .. base+e) in order, the fewest e <=
    max_extra that bring every head of the group to eps_hat <= tau (Z_S kept
    at its base value, which only over-estimates eps_hat; with `widths`,
    grown by the extras' lower bounds, below); if none does, the
    group falls back to dense attention. Writes the group's e to
    extra[b, g], the fallback flag to fallback[b, g], and the final bound to
    stats[b, h, 0] (0 after a fallback), e to stats[b, h, 2] and the flag to
    stats[b, h, 3]. With `early` (a precertify op's flags), a group with
    early[b, g] != 0 had no sparse pass: it falls back at once, and its
    stats[b, h, 3] is 2 (decided early) instead of 1.

    With `summaries`, `pages` and `vbox`, it also writes the per-channel box
    of the values the final set leaves out, for `condensate.merge` to bound
    the output error: vbox[b, g, 0, c] / vbox[b, g, 1, c] = min / max over
    the page summaries' value min / max (slots 3 and 4) of every page of
    sequence b holding an omitted position (a candidate position, neither
    anchor nor window, of a unit outside the base set and the e extras).
    For `token` granularity that is the page containing each omitted token,
    a superset of the omitted values. Without omitted positions, and after a
    fallback, the box is empty: min = +inf, max = -inf. `page_size` is the cache page size for
    both granularities.

    With `widths` (token granularity: a score_sketch op's page widths), every
    extra the walk takes adds its lower bound to Z: Z = Z_S + sum over the
    extras taken of exp(score - widths[b, h, t / page_size] - margin - m),
    the margin kBoundMargin * (1 + |score| + width + |m|) covering the
    float32 rounding of the scores, the width and the difference. Each
    extra's logit is at least that, so Z stays at most the attended mass
    and eps_hat = U / (Z + U) still bounds the omitted mass; both sums only
    move one way as extras are taken, so the walk stays monotone. A page
    width of +inf adds nothing.

    ```mlir
    condensate.certify page scores(%sc : memref<?x9x?xf32>)
        lens(%len : memref<?xi32>) indices(%idx : memref<?x3x6xi32>)
        base(%po, %pml : memref<?x9x2x64xf32>, memref<?x9x2x3xf32>)
        extra(%e : memref<?x3xi32>) fallback(%f : memref<?x3xi32>)
        stats(%st : memref<?x9x5xf32>)
        summaries(%s : memref<?x3x5x64xf32>) pages(%pt : memref<?x?xi32>)
        vbox(%vb : memref<?x3x2x64xf32>)
        {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64,
         page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-04 : f64}
    ```
  }];
  let arguments = (ins
    Condensate_GranularityAttr:$granularity,
    Condensate_F32Buffer:$scores,
    Optional<Condensate_F32Buffer>:$widths,
    Condensate_I32Buffer:$lens,
    Optional<Condensate_I32Buffer>:$windows,
    Condensate_I32Buffer:$indices,
    Condensate_F32Buffer:$partial_o,
    Condensate_F32Buffer:$partial_ml,
    Condensate_I32Buffer:$extra,
    Condensate_I32Buffer:$fallback,
    Condensate_F32Buffer:$stats,
    Optional<Condensate_I32Buffer>:$early,
    Optional<Condensate_F32Buffer>:$summaries,
    Optional<Condensate_I32Buffer>:$page_table,
    Optional<Condensate_F32Buffer>:$vbox,
    I64Attr:$anchor,
    I64Attr:$window,
    I64Attr:$window_max,
    I64Attr:$page_size,
    I64Attr:$base_units,
    F64Attr:$tau
  );
  let assemblyFormat = [{
    $granularity `scores` `(` $scores `:` type($scores) `)`
    (`widths` `(` $widths^ `:` type($widths) `)`)?
    `lens` `(` $lens `:` type($lens) `)`
    (`windows` `(` $windows^ `:` type($windows) `)`)?
    `indices` `(` $indices `:` type($indices) `)`
    `base` `(` $partial_o `,` $partial_ml `:` type($partial_o) `,`
    type($partial_ml) `)`
    `extra` `(` $extra `:` type($extra) `)`
    `fallback` `(` $fallback `:` type($fallback) `)`
    `stats` `(` $stats `:` type($stats) `)`
    (`early` `(` $early^ `:` type($early) `)`)?
    (`summaries` `(` $summaries^ `:` type($summaries) `)`)?
    (`pages` `(` $page_table^ `:` type($page_table) `)`)?
    (`vbox` `(` $vbox^ `:` type($vbox) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Condensate_MergeOp : Condensate_Op<"merge", [AttrSizedOperandSegments]> {
  let summary = "Combines online-softmax partials into the attention output";
  let description = [{
    out[b, h] = (sum_s exp(m_s - M) o_s) / (sum_s exp(m_s - M) l_s) with
    M = max_s m_s over every split of every partial set in `partials`
    (pairs of o, ml buffers). With `fallback` and `dense`, groups g with
    fallback[b, g] != 0 take the dense partials instead. A row whose total
    weight is zero (no position attended) is written as zeros. With `stats`,
    stats[b, h, 1] receives the number of positions attended; when
    `stats_eps` is given (no certificate ran), stats[b, h, 0] and
    stats[b, h, 4] receive it (0 for exact dense attention, NaN for an
    uncertified sparse set) and stats[b, h, 2] and stats[b, h, 3] receive 0.

    With `vbox` (written by `condensate.certify`, which also wrote
    eps_hat = stats[b, h, 0]), stats[b, h, 4] receives the bound on the
    output error of query head h (kv head g = h / (Hq / Hkv)):
    eps_hat * sqrt(sum_c max(vbox[b, g, 1, c] - o_c, o_c - vbox[b, g, 0, c],
    0)^2) with o = out[b, h], the output over the attended set, rounded up;
    0 when the group fell back to dense attention. It holds because
    o_dense - o = eps (mu_omitted - o), where eps <= eps_hat is the omitted
    softmax mass and mu_omitted, a convex combination of the omitted
    values, lies in the box. With neither `vbox` nor `stats_eps`,
    stats[b, h, 4] receives NaN.

    ```mlir
    condensate.merge partials(%po, %pml : memref<?x9x2x64xf32>, memref<?x9x2x3xf32>)
        fallback(%f : memref<?x3xi32>)
        dense(%pod, %pmld : memref<?x9x4x64xf32>, memref<?x9x4x3xf32>)
        out(%o : memref<?x9x64xf32>) stats(%st : memref<?x9x5xf32>)
        vbox(%vb : memref<?x3x2x64xf32>)
    ```
  }];
  let arguments = (ins
    Variadic<Condensate_F32Buffer>:$partials,
    Optional<Condensate_I32Buffer>:$fallback,
    Variadic<Condensate_F32Buffer>:$dense,
    Condensate_F32Buffer:$out,
    Optional<Condensate_F32Buffer>:$stats,
    Optional<Condensate_F32Buffer>:$vbox,
    OptionalAttr<F32Attr>:$stats_eps
  );
  let assemblyFormat = [{
    `partials` `(` $partials `:` type($partials) `)`
    (`fallback` `(` $fallback^ `:` type($fallback) `)`)?
    (`dense` `(` $dense^ `:` type($dense) `)`)?
    `out` `(` $out `:` type($out) `)`
    (`stats` `(` $stats^ `:` type($stats) `)`)?
    (`vbox` `(` $vbox^ `:` type($vbox) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

#endif // CONDENSATE_OPS_TD
