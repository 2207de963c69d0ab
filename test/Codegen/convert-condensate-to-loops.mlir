// convert-condensate-to-loops: every stage op becomes scf loops over memrefs
// with 8-lane vector rows; no condensate op is left.
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-loops -verify-diagnostics | FileCheck %s
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-loops -verify-diagnostics | FileCheck %s --check-prefix=NONE
// With kv-share (what CPUProgram compiles) each decode stage first asks the
// host for the calling thread's share of the kv heads and walks only those:
// g = part, part + parts, ...; a merge's query heads are those of its kv
// heads.
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-loops=kv-share=true -verify-diagnostics | FileCheck %s --check-prefix=SHARE
// SHARE-LABEL: func.func @dense_attend
// SHARE: %[[P:.*]] = call @condensate_cpu_kv_share(%c0_i64) : (i64) -> i64
// SHARE: %[[PART:.*]] = arith.index_cast %[[P]] : i64 to index
// SHARE: %[[N:.*]] = call @condensate_cpu_kv_share(%c1_i64) : (i64) -> i64
// SHARE: %[[PARTS:.*]] = arith.index_cast %[[N]] : i64 to index
// SHARE: scf.for %{{.*}} = %[[PART]] to %c2 step %[[PARTS]] {
// SHARE-LABEL: func.func @merge(
// SHARE: %[[MP:.*]] = call @condensate_cpu_kv_share(%c0_i64) : (i64) -> i64
// SHARE: scf.for %[[G:.*]] = %{{.*}} to %c2 step %{{.*}} {
// SHARE: scf.for %[[J:.*]] = %c0 to %c2 step %c1 {
// SHARE: arith.muli %[[G]], %c2 : index

// NONE-NOT: condensate.

// Page upper bounds: batch x head x page loops; rows of 16 read as two
// 8-lane vectors; the page loop stops at the context (min(slots, pages)):
// slots past it are left unwritten.
// CHECK-LABEL: func.func @score_pages_minmax
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: %[[NP:.*]] = arith.ceildivsi %{{.*}}, %c16 : index
// CHECK: scf.for %[[H:.*]] = %c0 to %c4 step %c1 {
// CHECK: %[[G:.*]] = arith.divsi %[[H]], %c2 : index
// CHECK-COUNT-2: vector.load %arg0[%[[B]], %[[H]], %{{.*}}] : memref<?x4x16xf32>, vector<8xf32>
// CHECK: %[[LIVE:.*]] = arith.minsi %{{.*}}, %[[NP]] : index
// CHECK: scf.for %[[J:.*]] = %c0 to %[[LIVE]] step %c1 {
// CHECK-COUNT-4: vector.load %arg1[%{{.*}}, %[[G]], %c{{[01]}}, %c{{[08]}}] : memref<?x2x5x16xf32>, vector<8xf32>
// CHECK: arith.maximumf %{{.*}} : vector<8xf32>
// CHECK: arith.maximumf %{{.*}} : vector<8xf32>
// CHECK: %[[SUM:.*]] = vector.reduction <add>, %{{.*}} : vector<8xf32> into f32
// CHECK: %[[V:.*]] = arith.mulf %[[SUM]], %[[SCALE]] : f32
// CHECK: memref.store %[[V]], %arg4[%[[B]], %[[H]], %[[J]]] : memref<?x4x?xf32>
// CHECK-NOT: 0xFF800000
// CHECK-NOT: condensate.
func.func @score_pages_minmax(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_pages block_minmax q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.25 : f32}
  return
}

// -----

// Page means: q . ksum (summary slot 2) divided by the page's token count.
// CHECK-LABEL: func.func @score_pages_mean
// CHECK: vector.load %arg1[%{{.*}}, %{{.*}}, %c2, %c0] : memref<?x2x5x16xf32>, vector<8xf32>
// CHECK: vector.load %arg1[%{{.*}}, %{{.*}}, %c2, %c8] : memref<?x2x5x16xf32>, vector<8xf32>
// CHECK: math.fma %{{.*}} : vector<8xf32>
// CHECK: vector.reduction <add>
// CHECK: %[[CNT:.*]] = arith.minsi %{{.*}}, %c16 : index
// CHECK: arith.sitofp %{{.*}} : i64 to f32
// CHECK: arith.divf
// CHECK-NOT: arith.maximumf
// CHECK-NOT: condensate.
func.func @score_pages_mean(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_pages block_mean q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.25 : f32}
  return
}

// -----

// Token logits: f16 keys widened per 8-lane chunk; token t lives in page
// t / 16 at offset t % 16; the loop stops at the context.
// CHECK-LABEL: func.func @score_tokens
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[NT:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: scf.for %[[T:.*]] = %c0 to %[[NT]] step %c1 {
// CHECK: arith.divsi %[[T]], %c16 : index
// CHECK: arith.remsi %[[T]], %c16 : index
// CHECK: %[[K0:.*]] = vector.load %arg1[{{.*}}, %c0] : memref<?x2x16x16xf16>, vector<8xf16>
// CHECK-NEXT: arith.extf %[[K0]] : vector<8xf16> to vector<8xf32>
// CHECK: %[[K1:.*]] = vector.load %arg1[{{.*}}, %c8] : memref<?x2x16x16xf16>, vector<8xf16>
// CHECK-NEXT: arith.extf %[[K1]] : vector<8xf16> to vector<8xf32>
// CHECK: vector.reduction <add>
// CHECK: memref.store %{{.*}}, %arg4[%{{.*}}, %{{.*}}, %[[T]]] : memref<?x4x?xf32>
// CHECK-NOT: condensate.
func.func @score_tokens(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = 0.25 : f32}
  return
}

// -----

// Top-k by a stable radix sort: ordered integer keys in a scratch buffer,
// the candidates in unit order, four byte passes (descending digits, from
// the low byte) of counting, prefix sums and scatter, then the base set in
// unit order, -1 fill and the extras that follow it in the order.
// CHECK-LABEL: func.func @select_topk
// CHECK: %[[KEYS:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// A null scratch buffer (of at least one element) returns at once.
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[KEYS]]
// CHECK: arith.cmpi eq, %[[P]], %c0
// CHECK: cf.cond_br %{{.*}}, ^[[FAIL:bb[0-9]+]], ^[[OK:bb[0-9]+]]
// CHECK: ^[[FAIL]]:
// CHECK-NEXT: return
// CHECK: %[[ORDER:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: %[[SPARE:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: %[[COUNT:.*]] = memref.alloc(%c256) : memref<?xi32>
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// The adaptive window, clamped to [16, 64].
// CHECK: %[[W0:.*]] = arith.maxsi %{{.*}}, %c16 : index
// CHECK-NEXT: arith.minsi %[[W0]], %c64 : index
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// The group's score is the max over its 2 query heads.
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: memref.store %{{.*}}, %[[KEYS]][%{{.*}}] : memref<?xi32>
// CHECK: memref.store %{{.*}}, %[[ORDER]][%{{.*}}] : memref<?xi32>
// Pass 1 (low byte): counts, prefix sums, scatter into the spare buffer.
// CHECK: memref.store %c0_i32, %[[COUNT]]
// CHECK: arith.shrui %{{.*}}, %c0_i32 : i32
// CHECK: arith.subi %c255_i32, %{{.*}} : i32
// CHECK: scf.for {{.*}} = %c0 to %c256 step %c1 iter_args({{.*}} = %c0_i32) -> (i32) {
// CHECK: memref.store %{{.*}}, %[[SPARE]][%{{.*}}] : memref<?xi32>
// Passes 2-4 alternate the buffers and end in the order buffer.
// CHECK: arith.shrui %{{.*}}, %c8_i32 : i32
// CHECK: memref.store %{{.*}}, %[[ORDER]][%{{.*}}] : memref<?xi32>
// CHECK: arith.shrui %{{.*}}, %c16_i32 : i32
// CHECK: memref.store %{{.*}}, %[[SPARE]][%{{.*}}] : memref<?xi32>
// CHECK: arith.shrui %{{.*}}, %c24_i32 : i32
// CHECK: memref.store %{{.*}}, %[[ORDER]][%{{.*}}] : memref<?xi32>
// The first min(candidates, 4) of the order, written in unit order.
// CHECK: arith.minsi %{{.*}}, %c4 : index
// CHECK: scf.if %{{.*}} {
// CHECK: memref.store %{{.*}}, %arg3[%[[B]], %[[G]], %{{.*}}] : memref<?x2x6xi32>
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %c4 step %c1 {
// CHECK-NEXT: memref.store %c-1_i32, %arg3[%[[B]], %[[G]], %[[J]]] : memref<?x2x6xi32>
// Slots 4 and 5 take the next units in ranking order, as many as there
// are candidates, then -1 (two plain loops, no branch a slot).
// CHECK: %[[FILLED:.*]] = arith.maxsi %{{.*}}, %c4 : index
// CHECK: scf.for %[[E:.*]] = %c4 to %[[FILLED]] step %c1 {
// CHECK-NEXT: %[[U:.*]] = memref.load %[[ORDER]][%[[E]]] : memref<?xi32>
// CHECK-NEXT: memref.store %[[U]], %arg3[%[[B]], %[[G]], %[[E]]] : memref<?x2x6xi32>
// CHECK: scf.for %[[P:.*]] = %[[FILLED]] to %c6 step %c1 {
// CHECK-NEXT: memref.store %c-1_i32, %arg3[%[[B]], %[[G]], %[[P]]] : memref<?x2x6xi32>
// CHECK: memref.dealloc %[[KEYS]] : memref<?xi32>
// CHECK-NOT: condensate.
func.func @select_topk(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %w: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) windows(%w : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

// No extras (6 slots, base 6): no sort. The keys' walk counts their top
// bytes; a radix select finds the sixth key from the top byte down, each
// pass counting the next byte of the candidates that share the bytes so
// far (compacted into the spare buffer); the base set is then every unit
// above that key and the first at it, in unit order, then -1.
// CHECK-LABEL: func.func @select_topk_base_only
// CHECK: %[[KEYS:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: %[[ORDER:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: %[[SPARE:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: %[[COUNT:.*]] = memref.alloc(%c256) : memref<?xi32>
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: memref.store %c0_i32, %[[COUNT]]
// CHECK: memref.store %{{.*}}, %[[ORDER]][%{{.*}}] : memref<?xi32>
// CHECK: arith.shrui %{{.*}}, %c24_i32 : i32
// CHECK: memref.store %{{.*}}, %[[COUNT]]
// CHECK: arith.cmpi sle, %{{.*}}, %c6_i32 : i32
// CHECK: scf.if %{{.*}} -> (i32, i32) {
// CHECK: arith.shrui %{{.*}}, %c16_i32 : i32
// CHECK: memref.store %{{.*}}, %[[SPARE]][%{{.*}}] : memref<?xi32>
// CHECK: arith.shrui %{{.*}}, %c8_i32 : i32
// CHECK: arith.shrui %{{.*}}, %c0_i32 : i32
// CHECK-NOT: %[[ORDER]]
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i32
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}, %[[G]], %{{.*}}] : memref<?x2x6xi32>
// CHECK: memref.store %c-1_i32, %arg2[%{{.*}}, %[[G]], %{{.*}}] : memref<?x2x6xi32>
// CHECK-NOT: %[[ORDER]]
// CHECK: memref.dealloc
// CHECK-NOT: condensate.
func.func @select_topk_base_only(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  condensate.select_topk token scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 4 : i64, window_max = 4 : i64, page_size = 16 : i64, base = 6 : i64}
  return
}

// -----

// base = 0 (a certified policy without top-k): there is no base set, so
// nothing is collected and the 2 slots take the ranked extras from the top
// of the order. This used to store every candidate into slots 0.. past the
// end of the index row.
// CHECK-LABEL: func.func @select_topk_zero_base
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK-NOT: memref.store %{{.*}}, %arg2
// CHECK: %[[MIN:.*]] = arith.minsi %{{.*}}, %c2 : index
// CHECK-NEXT: %[[FILLED:.*]] = arith.maxsi %[[MIN]], %c0 : index
// CHECK-NEXT: scf.for %[[E:.*]] = %c0 to %[[FILLED]] step %c1 {
// CHECK: memref.store %{{.*}}, %arg2[%[[B]], %[[G]], %[[E]]] : memref<?x2x2xi32>
// CHECK: scf.for %[[P:.*]] = %[[FILLED]] to %c2 step %c1 {
// CHECK: memref.store %c-1_i32, %arg2[%[[B]], %[[G]], %[[P]]] : memref<?x2x2xi32>
// CHECK-NOT: memref.store %{{.*}}, %arg2
// CHECK: memref.dealloc
// CHECK-NOT: condensate.
func.func @select_topk_zero_base(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x2xi32>) {
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x2xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 0 : i64}
  return
}

// -----

// Online softmax over the virtual list: 1 anchor + 64 window + 4 pages of 16
// = 129 slots in 2 splits of 65; bf16 rows widened; units read from index
// slots first = 2 onwards, limited per group: a split stops at the last
// slot the limit leaves (65 forced + 16 per unit). The group's 2 query
// heads are walked together (one load of each row), 8 slots a tile, their
// logits' exponentials in vector arithmetic.
// CHECK-LABEL: func.func @sparse_attend
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: %[[LIM:.*]] = memref.load %arg6[%[[B]], %[[G]]] : memref<?x2xi32>
// CHECK: %[[GH:.*]] = arith.muli %[[G]], %c2 : index
// CHECK: %[[H0:.*]] = arith.addi %[[GH]], %c0 : index
// CHECK: scf.for %[[S:.*]] = %c0 to %c2 step %c1 {
// CHECK: %[[V0:.*]] = arith.muli %[[S]], %c65 : index
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %c129 : index
// CHECK: %[[L:.*]] = arith.maxsi %{{.*}}, %c0 : index
// CHECK: %[[LT:.*]] = arith.muli %[[L]], %c16 : index
// CHECK: %[[USED:.*]] = arith.addi %c65, %[[LT]] : index
// CHECK: %[[CUT:.*]] = arith.minsi %[[END]], %[[USED]] : index
// CHECK: %[[V1:.*]] = arith.maxsi %[[CUT]], %[[V0]] : index
// CHECK: scf.for %{{.*}} = %[[V0]] to %[[V1]] step %c8 iter_args({{.*}}) -> (f32, f32, f32, vector<8xf32>, vector<8xf32>, f32, f32, f32, vector<8xf32>, vector<8xf32>) {
// CHECK: arith.addi %{{.*}}, %c2 : index
// CHECK: memref.load %arg5[%[[B]], %[[G]], %{{.*}}] : memref<?x2x6xi32>
// CHECK: vector.load %arg1[{{.*}}] : memref<?x2x16x16xbf16>, vector<8xbf16>
// CHECK: vector.load %arg1[{{.*}}, %c8] : memref<?x2x16x16xbf16>, vector<8xbf16>
// CHECK-NOT: vector.load %arg1
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %[[LOGITS:.*]][%c0, %{{.*}}] : memref<2x8xf32>
// CHECK: vector.load %[[LOGITS]][%c0, %c0] : memref<2x8xf32>, vector<8xf32>
// CHECK: vector.reduction <maximumf>, %{{.*}} : vector<8xf32> into f32
// CHECK-NOT: math.exp
// CHECK: vector.load %arg2[{{.*}}] : memref<?x2x16x16xbf16>, vector<8xbf16>
// CHECK: math.fma %{{.*}} : vector<8xf32>
// CHECK: %[[HA:.*]] = arith.addi %[[H0]], %c0 : index
// CHECK: memref.store %{{.*}}, %arg8[%[[B]], %[[HA]], %[[S]], %c0] : memref<?x4x2x3xf32>
// CHECK: memref.store %{{.*}}, %arg8[%[[B]], %[[HA]], %[[S]], %c1] : memref<?x4x2x3xf32>
// CHECK: memref.store %{{.*}}, %arg8[%[[B]], %[[HA]], %[[S]], %c2] : memref<?x4x2x3xf32>
// CHECK: vector.store %{{.*}}, %arg7[%[[B]], %[[HA]], %[[S]], %c0] : memref<?x4x2x16xf32>, vector<8xf32>
// CHECK: vector.store %{{.*}}, %arg7[%[[B]], %[[HA]], %[[S]], %c8] : memref<?x4x2x16xf32>, vector<8xf32>
// CHECK: %[[HB:.*]] = arith.addi %[[H0]], %c1 : index
// CHECK: memref.store %{{.*}}, %arg8[%[[B]], %[[HB]], %[[S]], %c0] : memref<?x4x2x3xf32>
// CHECK: vector.store %{{.*}}, %arg7[%[[B]], %[[HB]], %[[S]], %c8] : memref<?x4x2x16xf32>, vector<8xf32>
// CHECK-NOT: condensate.
func.func @sparse_attend(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xbf16>, %v: memref<?x2x16x16xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %lim: memref<?x2xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) limits(%lim : memref<?x2xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 2 : i64, count = 4 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

// Flash decoding over the S = 16 static splits: each sequence's n tokens are
// cut into used = min(S, max(min(ceil(n / 256), 128), ceil(n / 1024))) equal
// chunks of ceil(n / used) tokens (the remaining splits stay empty); a
// masked-off group attends nothing.
// CHECK-LABEL: func.func @dense_attend
// CHECK: %[[NS:.*]] = memref.dim %arg7, %c2 : memref<?x4x16x3xf32>
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: %[[LEN:.*]] = memref.load %arg4[%[[B]]] : memref<?xi32>
// CHECK-NEXT: %[[N:.*]] = arith.index_cast %[[LEN]] : i32 to index
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: %[[M:.*]] = memref.load %arg5[%[[B]], %[[G]]] : memref<?x2xi32>
// CHECK: %[[ACTIVE:.*]] = arith.cmpi ne, %[[M]], %c0_i32 : i32
// CHECK: scf.for %[[S:.*]] = %c0 to %[[NS]] step %c1 {
// CHECK-NEXT: %[[C256:.*]] = arith.ceildivsi %[[N]], %c256 : index
// CHECK-NEXT: %[[C1:.*]] = arith.maxsi %[[C256]], %c1 : index
// CHECK-NEXT: %[[USED:.*]] = arith.minsi %[[NS]], %[[C1]] : index
// CHECK-NEXT: %[[CHUNK:.*]] = arith.ceildivsi %[[N]], %[[USED]] : index
// CHECK-NEXT: %[[S0:.*]] = arith.muli %[[S]], %[[CHUNK]] : index
// CHECK-NEXT: %[[T0:.*]] = arith.minsi %[[S0]], %[[N]] : index
// CHECK-NEXT: %[[E0:.*]] = arith.addi %[[T0]], %[[CHUNK]] : index
// CHECK-NEXT: %[[T1:.*]] = arith.minsi %[[E0]], %[[N]] : index
// CHECK-NEXT: %[[END:.*]] = arith.select %[[ACTIVE]], %[[T1]], %[[T0]] : index
// CHECK: scf.for %{{.*}} = %[[T0]] to %[[END]] step %c8 iter_args({{.*}}) -> (f32, f32, f32, vector<8xf32>, vector<8xf32>, f32, f32, f32, vector<8xf32>, vector<8xf32>) {
// CHECK: vector.reduction <maximumf>, %{{.*}} : vector<8xf32> into f32
// CHECK: math.floor %{{.*}} : vector<8xf32>
// CHECK-NOT: math.exp
// CHECK: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: memref.store %{{.*}}, %arg7[%[[B]], %{{.*}}, %[[S]], %c0] : memref<?x4x16x3xf32>
// CHECK: vector.store %{{.*}}, %arg6[%[[B]], %{{.*}}, %[[S]], %c8] : memref<?x4x16x16xf32>, vector<8xf32>
// CHECK: memref.store %{{.*}}, %arg7[%[[B]], %{{.*}}, %[[S]], %c0] : memref<?x4x16x3xf32>
// CHECK-NOT: condensate.
func.func @dense_attend(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %m: memref<?x2xi32>, %po: memref<?x4x16x16xf32>, %pml: memref<?x4x16x3xf32>) {
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) mask(%m : memref<?x2xi32>) partials(%po, %pml : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

// The certificate: per-unit marks in an i8 scratch buffer, omitted mass
// summed in f64 per head of the group, 8 units at a time (their counts,
// marks and bounds gathered through the stack, e^x in vector arithmetic: a
// polynomial and 2^k from exponent bits, no libm call; each unit's terms
// kept in an f64 scratch buffer), and a walk over the 2 extra slots
// against tau = 1e-4 that reads the kept terms, as does the final sum.
// CHECK-LABEL: func.func @certify
// CHECK-DAG: %[[TAU:.*]] = arith.constant 1.000000e-04 : f64
// CHECK: %[[MARKS:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: %[[MASSES:.*]] = memref.alloc(%{{.*}}) : memref<?xf64>
// CHECK: %[[LANES:.*]] = memref.alloca() : memref<4x8xf32>
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1 {
// CHECK: memref.store %c1_i8, %[[MARKS]]
// CHECK: scf.for {{.*}} step %c8 iter_args(%{{.*}} = %[[VZ:.*]], %{{.*}} = %[[VZ]]) -> (vector<8xf64>, vector<8xf64>) {
// CHECK: memref.store %{{.*}}, %[[LANES]]
// CHECK-NOT: math.exp
// CHECK: math.floor %{{.*}} : vector<8xf64>
// CHECK-NOT: math.exp
// CHECK: arith.shli %{{.*}} : vector<8xi64>
// CHECK-NOT: math.exp
// CHECK: vector.store %{{.*}}, %[[MASSES]][%{{.*}}] : memref<?xf64>, vector<8xf64>
// CHECK: arith.addf %{{.*}} : vector<8xf64>
// CHECK: vector.reduction <add>, %{{.*}} : vector<8xf64> into f64
// CHECK-NOT: math.exp
// CHECK: arith.cmpf ogt, %{{.*}}, %[[TAU]] : f64
// The walk: while not done and a slot is left (2 extra slots), the taken
// units' terms read back, not evaluated again.
// CHECK: scf.while ({{.*}}) : (i1, index, index, f64, f64) -> (i1, index, index, f64, f64) {
// CHECK: arith.cmpi slt, %{{.*}}, %c2 : index
// CHECK: scf.condition
// CHECK-NOT: math.floor
// CHECK: memref.load %[[MASSES]][%{{.*}}] : memref<?xf64>
// CHECK-NOT: math.floor
// CHECK: arith.cmpf ole, %{{.*}}, %[[TAU]] : f64
// CHECK-NOT: math.floor
// CHECK: vector.load %[[MASSES]][%{{.*}}] : memref<?xf64>, vector<8xf64>
// CHECK-NOT: math.floor
// CHECK: vector.reduction <add>, %{{.*}} : vector<8xf64> into f64
// The taken extras back in their slots in unit order (from slot 4), their
// marks cleared on the way.
// CHECK: scf.for %[[U:.*]] = %c0 to %{{.*}} step %c1 iter_args(%[[AT:.*]] = %c4) -> (index) {
// CHECK: %[[M:.*]] = memref.load %[[MARKS]][%[[U]]] : memref<?xi8>
// CHECK: arith.cmpi ne, %[[M]], %c0_i8 : i8
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}, %[[G]], %[[AT]]] : memref<?x2x6xi32>
// CHECK-NEXT: memref.store %c0_i8, %[[MARKS]][%[[U]]] : memref<?xi8>
// CHECK: memref.store %{{.*}}, %arg5[%{{.*}}, %[[G]]] : memref<?x2xi32>
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]]] : memref<?x2xi32>
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: memref.store %{{.*}}, %arg7[%{{.*}}, %{{.*}}, %c0] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %arg7[%{{.*}}, %{{.*}}, %c2] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %arg7[%{{.*}}, %{{.*}}, %c3] : memref<?x4x5xf32>
// CHECK: memref.dealloc %[[MARKS]] : memref<?xi8>
// CHECK-NOT: condensate.
func.func @certify(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// Merge of a sparse and a dense partial set, chosen per group by the
// fallback flag; zero total weight writes zeros.
// CHECK-LABEL: func.func @merge
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[H:.*]] = %c0 to %c4 step %c1 {
// CHECK: %[[FB:.*]] = memref.load %arg2[%[[B]], %{{.*}}] : memref<?x2xi32>
// CHECK: arith.cmpi ne, %[[FB]], %c0_i32 : i32
// CHECK: scf.for {{.*}} -> (f32, i32) {
// CHECK: scf.for {{.*}} -> (f32, i32) {
// CHECK: scf.for {{.*}} -> (f32, f32, vector<8xf32>, vector<8xf32>) {
// CHECK: math.exp
// CHECK: scf.for {{.*}} -> (f32, f32, vector<8xf32>, vector<8xf32>) {
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: vector.store %{{.*}}, %arg5[%[[B]], %[[H]], %c0] : memref<?x4x16xf32>, vector<8xf32>
// CHECK: vector.store %{{.*}}, %arg5[%[[B]], %[[H]], %c8] : memref<?x4x16xf32>, vector<8xf32>
// CHECK: memref.store %{{.*}}, %arg6[%[[B]], %[[H]], %c1] : memref<?x4x5xf32>
// stats_eps = 0: both bounds, extra and fallback entries are zero.
// CHECK: memref.store %[[Z:.*]], %arg6[%[[B]], %[[H]], %c0] : memref<?x4x5xf32>
// CHECK: memref.store %[[Z]], %arg6[%[[B]], %[[H]], %c2] : memref<?x4x5xf32>
// CHECK: memref.store %[[Z]], %arg6[%[[B]], %[[H]], %c3] : memref<?x4x5xf32>
// CHECK: memref.store %[[Z]], %arg6[%[[B]], %[[H]], %c4] : memref<?x4x5xf32>
// CHECK-NOT: condensate.
func.func @merge(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %pod: memref<?x4x3x16xf32>, %pmld: memref<?x4x3x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pod, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {stats_eps = 0.0 : f32}
  return
}

// -----

// Append: convert to f16, store, and update the page's summaries (reset on
// the first token of a page).
// CHECK-LABEL: func.func @append_kv
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: %[[OFF:.*]] = arith.remsi %{{.*}}, %c16 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[OFF]], %c0 : index
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: scf.for %[[C:.*]] = %c0 to %c16 step %c1 {
// CHECK: %[[K:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[V:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %[[K]], %arg2[%{{.*}}, %[[G]], %[[OFF]], %[[C]]] : memref<?x2x16x16xf16>
// CHECK: memref.store %[[V]], %arg3[%{{.*}}, %[[G]], %[[OFF]], %[[C]]] : memref<?x2x16x16xf16>
// CHECK: arith.minimumf
// CHECK: arith.select %[[FIRST]]
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]], %c0, %[[C]]]
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]], %c1, %[[C]]]
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]], %c2, %[[C]]]
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]], %c3, %[[C]]]
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %[[G]], %c4, %[[C]]]
// CHECK-NOT: condensate.
func.func @append_kv(%kn: memref<?x2x16xf32>, %vn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf16>, %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>, %s: memref<?x2x5x16xf32>) {
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x2x16xf32>) into(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>)
  return
}

// -----

// A decode attention must be decomposed first.
func.func @undecomposed(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op must be decomposed before lowering to loops (run condensate-decompose)}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

// The value box of a token-level certificate: per page of the context, the
// candidate positions against the marked (selected) tokens in the page; a
// page with an omitted token folds its value min/max summaries (slots 3
// and 4, read through the page table) into the box, which starts empty
// (and stays empty after a fallback: no pages are walked).
// CHECK-LABEL: func.func @certify_box
// CHECK-DAG: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MARKS:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: %[[LO0:.*]] = vector.broadcast %[[INF]] : f32 to vector<8xf32>
// CHECK: %[[HI0:.*]] = vector.broadcast %[[NINF]] : f32 to vector<8xf32>
// CHECK: %[[NP:.*]] = arith.ceildivsi %{{.*}}, %c16 : index
// CHECK: %[[UB:.*]] = arith.select %{{.*}}, %c0, %[[NP]] : index
// CHECK: %[[BOX:.*]]:4 = scf.for %[[J:.*]] = %c0 to %[[UB]] step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK: %[[SEL:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %c0) -> (index) {
// CHECK: memref.load %[[MARKS]]
// CHECK: %[[OMIT:.*]] = arith.cmpi sgt, %{{.*}}, %[[SEL]] : index
// CHECK: scf.if %[[OMIT]] -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK: %[[PG:.*]] = memref.load %arg9[%{{.*}}, %[[J]]] : memref<?x?xi32>
// CHECK: %[[P:.*]] = arith.index_cast %[[PG]] : i32 to index
// CHECK: vector.load %arg8[%[[P]], %{{.*}}, %c3, %c0] : memref<?x2x5x16xf32>, vector<8xf32>
// CHECK: vector.load %arg8[%[[P]], %{{.*}}, %c4, %c8] : memref<?x2x5x16xf32>, vector<8xf32>
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: vector.store %[[BOX]]#0, %arg10[%{{.*}}, %{{.*}}, %c0, %c0] : memref<?x2x2x16xf32>, vector<8xf32>
// CHECK: vector.store %[[BOX]]#3, %arg10[%{{.*}}, %{{.*}}, %c1, %c8] : memref<?x2x2x16xf32>, vector<8xf32>
// CHECK: memref.dealloc %[[MARKS]] : memref<?xi8>
func.func @certify_box(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x16xf32>) {
  condensate.certify token scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// The output bound after a certificate: the squared distance from the
// written output to the far corner of the group's box, times the eps_hat
// the certificate left in column 0, rounded up; 0 after a dense fallback.
// CHECK-LABEL: func.func @merge_box
// CHECK-DAG: %[[UP:.*]] = arith.constant 1.00024414 : f32
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[H:.*]] = %c0 to %c4 step %c1 {
// CHECK: %[[FB:.*]] = arith.cmpi ne, %{{.*}}, %c0_i32 : i32
// CHECK: vector.store %[[O0:.*]], %arg5[%[[B]], %[[H]], %c0] : memref<?x4x16xf32>, vector<8xf32>
// CHECK: memref.store %{{.*}}, %arg6[%[[B]], %[[H]], %c1] : memref<?x4x5xf32>
// CHECK: %[[EPS:.*]] = memref.load %arg6[%[[B]], %[[H]], %c0] : memref<?x4x5xf32>
// CHECK: %[[G:.*]] = arith.divsi %[[H]], %c2 : index
// CHECK: %[[LO:.*]] = vector.load %arg7[%[[B]], %[[G]], %c0, %c0] : memref<?x2x2x16xf32>, vector<8xf32>
// CHECK: %[[HI:.*]] = vector.load %arg7[%[[B]], %[[G]], %c1, %c0] : memref<?x2x2x16xf32>, vector<8xf32>
// CHECK-DAG: arith.subf %[[O0]], %[[LO]] : vector<8xf32>
// CHECK-DAG: arith.subf %[[HI]], %[[O0]] : vector<8xf32>
// CHECK: math.fma
// CHECK: %[[SUM:.*]] = vector.reduction <add>
// CHECK: %[[DIST:.*]] = math.sqrt %[[SUM]] : f32
// CHECK: %[[PROD:.*]] = arith.mulf %[[EPS]], %[[DIST]] : f32
// CHECK: %[[UPB:.*]] = arith.mulf %[[PROD]], %[[UP]] : f32
// CHECK: %[[BOUND:.*]] = arith.select %[[FB]], %{{.*}}, %[[UPB]] : f32
// CHECK: memref.store %[[BOUND]], %arg6[%[[B]], %[[H]], %c4] : memref<?x4x5xf32>
func.func @merge_box(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %pod: memref<?x4x3x16xf32>, %pmld: memref<?x4x3x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x2x16xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pod, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x2x16xf32>)
  return
}

// -----

// A certificate ran but left no box (no summaries): the output bound is
// NaN, "not computed".
// CHECK-LABEL: func.func @merge_no_box
// CHECK-DAG: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}, %c1] : memref<?x4x5xf32>
// CHECK-NEXT: memref.store %[[NAN]], %arg6[%{{.*}}, %{{.*}}, %c4] : memref<?x4x5xf32>
func.func @merge_no_box(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %pod: memref<?x4x3x16xf32>, %pmld: memref<?x4x3x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pod, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>)
  return
}

// -----

// Sketch scores: per page the box terms (|lo|, |hi|, step), each head's
// a_c = q_c * step_c into a stack row (alloca, outside the loops) and its
// constant sum_c q_c lo_c; then 8 tokens a lane each: per channel the
// word broadcast, shifted by each lane's bit offset, masked and made a
// float (exact), one fma a head; a vector of 8 scores stored at once. A
// page still filling takes the box bound.
// CHECK-LABEL: func.func @score_sketch
// CHECK: %[[COEF:.*]] = memref.alloca() : memref<2x16xf32>
// CHECK: math.absf
// CHECK: vector.store %{{.*}}, %[[COEF]][%{{.*}}, %{{.*}}] : memref<2x16xf32>, vector<8xf32>
// CHECK: vector.reduction <add>
// CHECK: scf.for
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: %[[W:.*]] = vector.broadcast %{{.*}} : i32 to vector<8xi32>
// CHECK: %[[SH:.*]] = arith.shrui %[[W]], %{{.*}} : vector<8xi32>
// CHECK: %[[CODE:.*]] = arith.andi %[[SH]], %{{.*}} : vector<8xi32>
// CHECK: %[[CF:.*]] = arith.sitofp %[[CODE]] : vector<8xi32> to vector<8xf32>
// CHECK: memref.load %[[COEF]]
// CHECK: math.fma %[[CF]], %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: vector.store %{{.*}}, %arg4[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x4x?xf32>, vector<8xf32>
// CHECK: arith.maximumf
// CHECK-NOT: condensate.
func.func @score_sketch(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

// 8-bit codes (4 tokens a word) are scored a token at a time: its codes
// shifted out of their word, made floats exactly (2^23 + code, less 2^23:
// the same on both targets) and dequantised by an fma, then a dot product
// a head.
// CHECK-LABEL: func.func @score_sketch_bytes
// CHECK-NOT: memref.alloca
// CHECK: math.absf
// CHECK: scf.for
// CHECK: arith.bitcast %{{.*}} : vector<8xf32> to vector<8xi32>
// CHECK: arith.shrui
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: arith.subf
// CHECK: math.fma
// CHECK: memref.store %{{.*}}, %arg4[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x4x?xf32>
// CHECK: arith.maximumf
// CHECK-NOT: condensate.
func.func @score_sketch_bytes(%q: memref<?x4x16xf32>, %s: memref<?x2x9x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x9x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, bits = 8 : i64, scale = 0.25 : f32}
  return
}

// -----

// Scores of one row per kv head (for top-k alone): each token's max over
// the group's heads, sketched (full page: 8 tokens' maxima a vector) or
// boxed (page filling, a token at a time), stored once in the kv head's
// row (loops over sequence, kv head, page, token).
// CHECK-LABEL: func.func @score_sketch_group
// CHECK: %[[M:.*]] = arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-NEXT: vector.store %[[M]], %arg4[%arg5, %arg6, %{{.*}}] : memref<?x2x?xf32>, vector<8xf32>
// CHECK: %[[MB:.*]] = arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: memref.store %[[MB]], %arg4[%arg5, %arg6, %{{.*}}] : memref<?x2x?xf32>
func.func @score_sketch_group(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x2x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x2x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @score_tokens_group
// CHECK: %[[M:.*]] = arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: memref.store %[[M]], %arg4[%arg5, %arg6, %arg7] : memref<?x2x?xf32>
func.func @score_tokens_group(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x2x?xf32>) {
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x2x?xf32>) {scale = 0.25 : f32}
  return
}

// -----

// The row that fills a page (offset 15) writes its channel's sketch: 2 word
// rows of 8 four-bit codes at rows 5 and 6.
// CHECK-LABEL: func.func @append_sketch
// CHECK: arith.cmpi eq, %{{.*}}, %c15
// CHECK: scf.if
// CHECK: math.floor
// CHECK: arith.fptoui
// CHECK: arith.shli
// CHECK: arith.ori
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK-NOT: condensate.
func.func @append_sketch(%kn: memref<?x2x16xf32>, %vn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf16>, %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>, %s: memref<?x2x7x16xf32>) {
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x2x16xf32>) into(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x7x16xf32>) {sketch_bits = 4 : i64}
  return
}

// -----

// The certificate's early test, per (sequence, kv head): the rank end of
// the slots, then per query head (two here) the bound reference, Zhat over
// anchor, window and base units, Ulow over the units ranked after the end;
// one flag stored per group.
// With its last slot empty (every candidate in a slot) a group stores 0
// at once.
// CHECK-LABEL: func.func @precertify
// CHECK: scf.for %[[B:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK: scf.for %[[G:.*]] = %c0 to %c2 step %c1 {
// CHECK: memref.load %arg5[%[[B]], %[[G]], %c5] : memref<?x2x6xi32>
// CHECK: scf.for %{{.*}} = %c0 to %c6 step %c1 iter_args(%{{.*}} = %true, %{{.*}} = %c-1_i32, %{{.*}} = %c-1) -> (i1, i32, index)
// CHECK-COUNT-2: scf.for %{{.*}} iter_args(%{{.*}} = %cst{{(_[0-9]+)?}}) -> (f32)
// CHECK: arith.cmpf ogt, %{{.*}}, %cst{{(_[0-9]+)?}} : f64
// CHECK: memref.store %{{.*}}, %arg6[%[[B]], %[[G]]] : memref<?x2xi32>
// CHECK-NOT: condensate.
func.func @precertify(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  condensate.precertify token q(%q : memref<?x4x64xf32>) k(%k : memref<?x2x16x64xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-2 : f64, scale = 0.125 : f32}
  return
}

// -----

// No slots (a certified policy without top-k or extras): nothing is in a
// slot, so there is no last slot to read and the test always runs.
// CHECK-LABEL: func.func @precertify_no_slots
// CHECK-NOT: memref.load %arg5[%{{.*}}, %{{.*}}, %c-1
// CHECK: arith.cmpf ogt, %{{.*}}, %cst{{(_[0-9]+)?}} : f64
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}] : memref<?x2xi32>
func.func @precertify_no_slots(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x0xi32>, %e: memref<?x2xi32>) {
  condensate.precertify token q(%q : memref<?x4x64xf32>) k(%k : memref<?x2x16x64xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x0xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 0 : i64, tau = 1.0e-2 : f64, scale = 0.125 : f32}
  return
}
