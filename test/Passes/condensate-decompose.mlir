// condensate-decompose: a specialised decode attention becomes its stages.
// RUN: condensate-opt %s -split-input-file --condensate-decompose -verify-diagnostics | FileCheck %s
// RUN: condensate-opt %s -split-input-file --condensate-decompose="dense-splits=4" -verify-diagnostics | FileCheck %s --check-prefix=SPLITS

// A pillar (dense) layer: static [B, Hq, S, D] partials with S = 16 splits
// (the CPU default; each sequence's context is cut into min(S, ceil(n/256))
// equal chunks at run time), merged with an exact (0) bound.
// CHECK-LABEL: func.func @dense
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x16xf32>, %[[K:.*]]: memref<?x2x16x16xf32>, %[[V:.*]]: memref<?x2x16x16xf32>, %[[PT:.*]]: memref<?x?xi32>, %[[LEN:.*]]: memref<?xi32>, %[[O:.*]]: memref<?x4x16xf32>, %[[ST:.*]]: memref<?x4x5xf32>)
// CHECK-NOT: condensate.decode_attention
// CHECK: %[[B:.*]] = memref.dim %[[Q]], %c0
// CHECK-NOT: arith.ceildiv
// CHECK: %[[PO:.*]] = memref.alloc(%[[B]]) : memref<?x4x16x16xf32>
// CHECK-NEXT: %[[PML:.*]] = memref.alloc(%[[B]]) : memref<?x4x16x3xf32>
// CHECK-NEXT: condensate.dense_attend q(%[[Q]] : memref<?x4x16xf32>) kv(%[[K]], %[[V]] : memref<?x2x16x16xf32>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) partials(%[[PO]], %[[PML]] : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]] : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) out(%[[O]] : memref<?x4x16xf32>) stats(%[[ST]] : memref<?x4x5xf32>) {stats_eps = 0.000000e+00 : f32}
// CHECK-NEXT: memref.dealloc %[[PO]]
// CHECK-NEXT: memref.dealloc %[[PML]]
// CHECK-NEXT: return
// dense-splits=4 overrides the target's choice.
// SPLITS-LABEL: func.func @dense
// SPLITS: %[[PO:.*]] = memref.alloc(%{{.*}}) : memref<?x4x4x16xf32>
// SPLITS-NEXT: %[[PML:.*]] = memref.alloc(%{{.*}}) : memref<?x4x4x3xf32>
// SPLITS-NEXT: condensate.dense_attend {{.*}} partials(%[[PO]], %[[PML]] : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
func.func @dense(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// A plain block_minmax policy without stats: page scores, top 2 pages, one
// sparse pass in the spec's 2 splits, merge with a NaN bound (uncertified).
// CHECK-LABEL: func.func @page
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x16xf32>, %[[K:.*]]: memref<?x2x16x16xf16>, %[[V:.*]]: memref<?x2x16x16xf16>, %[[PT:.*]]: memref<?x?xi32>, %[[LEN:.*]]: memref<?xi32>, %[[S:.*]]: memref<?x2x5x16xf32>, %[[O:.*]]: memref<?x4x16xf32>)
// CHECK: %[[SC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK-NEXT: condensate.score_pages block_minmax q(%[[Q]] : memref<?x4x16xf32>) summaries(%[[S]] : memref<?x2x5x16xf32>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) scores(%[[SC]] : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 2.500000e-01 : f32}
// CHECK-NEXT: %[[IDX:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xi32>
// CHECK-NEXT: condensate.select_topk page scores(%[[SC]] : memref<?x4x?xf32>) lens(%[[LEN]] : memref<?xi32>) indices(%[[IDX]] : memref<?x2x2xi32>) {anchor = 1 : i64, base = 2 : i64, page_size = 16 : i64, window = 64 : i64, window_max = 64 : i64}
// CHECK-NEXT: %[[PO:.*]] = memref.alloc(%{{.*}}) : memref<?x4x2x16xf32>
// CHECK-NEXT: %[[PML:.*]] = memref.alloc(%{{.*}}) : memref<?x4x2x3xf32>
// CHECK-NEXT: condensate.sparse_attend page q(%[[Q]] : memref<?x4x16xf32>) kv(%[[K]], %[[V]] : memref<?x2x16x16xf16>) pages(%[[PT]] : memref<?x?xi32>) lens(%[[LEN]] : memref<?xi32>) indices(%[[IDX]] : memref<?x2x2xi32>) partials(%[[PO]], %[[PML]] : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, count = 2 : i64, first = 0 : i64, include_forced = true, scale = 2.500000e-01 : f32, window = 64 : i64, window_max = 64 : i64}
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]] : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%[[O]] : memref<?x4x16xf32>) {stats_eps = 0x7FC00000 : f32}
// CHECK-NOT: condensate.certify
// CHECK-COUNT-4: memref.dealloc
// CHECK-NEXT: return
func.func @page(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 32>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 2, extra_units = 0, splits = 2, target = cpu>}
  return
}

// -----

// The exact selector ranks tokens: every key is scored, 32 token units are
// kept, and the adaptive window reaches selection and attention. Top-k
// alone ranks by each group's max, so the scores hold one row per kv head.
// CHECK-LABEL: func.func @token
// CHECK-SAME: %[[W:arg5]]: memref<?xi32>
// CHECK: %[[MP:.*]] = memref.dim %arg3, %c1
// CHECK: %[[NT:.*]] = arith.muli %[[MP]], %c16
// CHECK: %[[SC:.*]] = memref.alloc(%{{.*}}, %[[NT]]) : memref<?x2x?xf32>
// CHECK-NEXT: condensate.score_tokens q(%arg0 : memref<?x4x16xf32>) k(%arg1 : memref<?x2x16x16xf32>) pages(%arg3 : memref<?x?xi32>) lens(%arg4 : memref<?xi32>) scores(%[[SC]] : memref<?x2x?xf32>) {scale = 2.500000e-01 : f32}
// CHECK-NEXT: %[[IDX:.*]] = memref.alloc(%{{.*}}) : memref<?x2x32xi32>
// CHECK-NEXT: condensate.select_topk token scores(%[[SC]] : memref<?x2x?xf32>) lens(%arg4 : memref<?xi32>) windows(%[[W]] : memref<?xi32>) indices(%[[IDX]] : memref<?x2x32xi32>) {anchor = 1 : i64, base = 32 : i64, page_size = 16 : i64, window = 64 : i64, window_max = 256 : i64}
// CHECK: condensate.sparse_attend token {{.*}} windows(%[[W]] : memref<?xi32>) indices(%[[IDX]] : memref<?x2x32xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 1 : i64, count = 32 : i64, first = 0 : i64, include_forced = true, scale = 2.500000e-01 : f32, window = 64 : i64, window_max = 256 : i64}
// CHECK-NEXT: condensate.merge {{.*}} {stats_eps = 0x7FC00000 : f32}
// CHECK-NOT: condensate.score_pages
func.func @token(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %w: memref<?xi32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) windows(%w : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 32, selector = exact>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 32, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// The sketch selector, uncertified: score_sketch writes each group's max
// (one row per kv head) for top-k; certified, every head's row (below).
// CHECK-LABEL: func.func @sketch
// CHECK: %[[SC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?xf32>
// CHECK-NEXT: condensate.score_sketch q(%arg0 : memref<?x4x16xf32>) summaries(%arg5 : memref<?x2x7x16xf32>) pages(%arg3 : memref<?x?xi32>) lens(%arg4 : memref<?xi32>) scores(%[[SC]] : memref<?x2x?xf32>) {bits = 4 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32}
// CHECK-NEXT: %[[IDX:.*]] = memref.alloc(%{{.*}}) : memref<?x2x32xi32>
// CHECK-NEXT: condensate.select_topk token scores(%[[SC]] : memref<?x2x?xf32>)
// Certified with extras, score_sketch also writes each page's width, so
// that the certificate takes the extras' lower bounds into Z, and the
// early test counts the extras' bounds in its Zhat.
// CHECK-LABEL: func.func @sketch_certified
// CHECK: %[[SC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK-NEXT: %[[W:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK-NEXT: condensate.score_sketch {{.*}} scores(%[[SC]] : memref<?x4x?xf32>) widths(%[[W]] : memref<?x4x?xf32>)
// CHECK: condensate.precertify token {{.*}} extras_in_z
// CHECK: condensate.certify token scores(%[[SC]] : memref<?x4x?xf32>) widths(%[[W]] : memref<?x4x?xf32>) lens
func.func @sketch(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x7x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x7x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = sketch, bits = 4>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 32, extra_units = 0, splits = 1, target = cpu>}
  return
}
func.func @sketch_certified(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x7x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x7x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = sketch, bits = 4, tau = 1.0e-3, max_extra = 4>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 32, extra_units = 4, splits = 1, target = cpu>}
  return
}

// -----

// block_mean ranks pages by their mean key, which bounds nothing: the
// certificate gets a second, block_minmax scoring of the same pages, which
// the early test reads too (it ranks by the mean scores, as selection
// did). With max_extra = 0 a failing group goes straight to dense
// attention.
// CHECK-LABEL: func.func @mean
// CHECK: %[[SC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK-NEXT: condensate.score_pages block_mean {{.*}} scores(%[[SC]] : memref<?x4x?xf32>)
// CHECK: condensate.select_topk page scores(%[[SC]] : memref<?x4x?xf32>) lens(%arg4 : memref<?xi32>) indices(%[[IDX:.*]] : memref<?x2x2xi32>)
// CHECK: %[[EARLY:.*]] = memref.alloc(%{{.*}}) : memref<?x2xi32>
// CHECK-NEXT: %[[BND:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK-NEXT: condensate.score_pages block_minmax {{.*}} scores(%[[BND]] : memref<?x4x?xf32>)
// CHECK-NEXT: condensate.precertify page {{.*}} scores(%[[SC]] : memref<?x4x?xf32>) bounds(%[[BND]] : memref<?x4x?xf32>) {{.*}} indices(%[[IDX]] : memref<?x2x2xi32>) early(%[[EARLY]] : memref<?x2xi32>)
// CHECK: condensate.sparse_attend page {{.*}} skip(%[[EARLY]] : memref<?x2xi32>) partials(%[[PO:.*]], %[[PML:.*]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>)
// CHECK-NOT: score_pages
// With stats and summaries the certificate also boxes the omitted values
// (one [min, max] row pair per kv head) for the merge's output bound.
// CHECK: %[[VB:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2x16xf32>
// CHECK-NEXT: condensate.certify page scores(%[[BND]] : memref<?x4x?xf32>) lens(%arg4 : memref<?xi32>) indices(%[[IDX]] : memref<?x2x2xi32>) base(%[[PO]], %[[PML]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%{{.*}} : memref<?x2xi32>) fallback(%[[FB:.*]] : memref<?x2xi32>) stats(%arg7 : memref<?x4x5xf32>) early(%[[EARLY]] : memref<?x2xi32>) summaries(%arg5 : memref<?x2x5x16xf32>) pages(%arg3 : memref<?x?xi32>) vbox(%[[VB]] : memref<?x2x2x16xf32>) {anchor = 1 : i64, base_units = 2 : i64, page_size = 16 : i64, tau = 1.000000e-03 : f64, window = 16 : i64, window_max = 16 : i64}
// CHECK-NOT: condensate.sparse_attend
// CHECK: condensate.dense_attend {{.*}} mask(%[[FB]] : memref<?x2xi32>)
// The certificate wrote eps_hat: the merge adds the output bound from it.
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) fallback(%[[FB]] : memref<?x2xi32>) dense({{.*}}) out(%arg6 : memref<?x4x16xf32>) stats(%arg7 : memref<?x4x5xf32>) vbox(%[[VB]] : memref<?x2x2x16xf32>){{$}}
// CHECK-COUNT-11: memref.dealloc
// CHECK-NEXT: return
func.func @mean(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = block_mean, tau = 1.0e-3>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// An uncertified policy with stats: no certificate runs (eps_hat is NaN,
// "not computed"); the merge fills the stats.
// CHECK-LABEL: func.func @plain_stats
// CHECK: condensate.score_pages block_minmax
// CHECK: condensate.select_topk page
// CHECK: condensate.sparse_attend page {{.*}} partials(%[[PO:.*]], %[[PML:.*]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>)
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) out(%arg6 : memref<?x4x16xf32>) stats(%arg7 : memref<?x4x5xf32>) {stats_eps = 0x7FC00000 : f32}
// CHECK-NOT: condensate.certify
// CHECK-COUNT-4: memref.dealloc
// CHECK-NEXT: return
func.func @plain_stats(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16, topk = 32>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// Stats on a plain window: nothing is scored or certified just to fill
// eps_hat (it stays NaN); only the summaries-free window pass runs.
// CHECK-LABEL: func.func @window_stats
// CHECK-NOT: condensate.score_
// CHECK-NOT: condensate.select_topk
// CHECK-NOT: condensate.certify
// CHECK: condensate.sparse_attend page {{.*}} partials(%[[PO:.*]], %[[PML:.*]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 1 : i64, count = 0 : i64,
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) out(%arg6 : memref<?x4x16xf32>) stats(%arg7 : memref<?x4x5xf32>) {stats_eps = 0x7FC00000 : f32}
// CHECK-NEXT: memref.dealloc %[[PO]]
// CHECK-NEXT: memref.dealloc %[[PML]]
// CHECK-NEXT: return
func.func @window_stats(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// tau > 0 with up to 8 extra pages: indices hold 4 + 8 slots; the early
// test sends the groups whose certificate cannot pass to dense before the
// sparse pass, which skips them; the extra pass reads slots [4, 12) limited
// per group by the certificate's count; the dense fallback is masked by the
// fallback flags; the merge takes all three.
// CHECK-LABEL: func.func @certified
// CHECK: condensate.score_pages block_minmax {{.*}} scores(%[[SC:.*]] : memref<?x4x?xf32>)
// CHECK: %[[IDX:.*]] = memref.alloc(%{{.*}}) : memref<?x2x12xi32>
// CHECK-NEXT: condensate.select_topk page {{.*}} indices(%[[IDX]] : memref<?x2x12xi32>) {anchor = 1 : i64, base = 4 : i64,
// CHECK-NEXT: %[[EARLY:.*]] = memref.alloc(%{{.*}}) : memref<?x2xi32>
// CHECK-NEXT: condensate.precertify page q(%arg0 : memref<?x4x16xf32>) k(%arg1 : memref<?x2x16x16xf32>) pages(%arg3 : memref<?x?xi32>) scores(%[[SC]] : memref<?x4x?xf32>) bounds(%[[SC]] : memref<?x4x?xf32>) lens(%arg4 : memref<?xi32>) indices(%[[IDX]] : memref<?x2x12xi32>) early(%[[EARLY]] : memref<?x2xi32>) {anchor = 1 : i64, base_units = 4 : i64, page_size = 16 : i64, scale = 2.500000e-01 : f32, tau = 1.000000e-04 : f64, window = 64 : i64, window_max = 64 : i64}
// CHECK: condensate.sparse_attend page {{.*}} indices(%[[IDX]] : memref<?x2x12xi32>) skip(%[[EARLY]] : memref<?x2xi32>) partials(%[[PO:.*]], %[[PML:.*]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 1 : i64, count = 4 : i64, first = 0 : i64, include_forced = true,
// CHECK: %[[EXTRA:.*]] = memref.alloc(%{{.*}}) : memref<?x2xi32>
// CHECK-NEXT: %[[FB:.*]] = memref.alloc(%{{.*}}) : memref<?x2xi32>
// CHECK-NEXT: %[[ST:.*]] = memref.alloc(%{{.*}}) : memref<?x4x5xf32>
// Without stats nobody reads an output bound: no value box.
// CHECK-NEXT: condensate.certify page scores(%[[SC]] : memref<?x4x?xf32>) lens(%arg4 : memref<?xi32>) indices(%[[IDX]] : memref<?x2x12xi32>) base(%[[PO]], %[[PML]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%[[EXTRA]] : memref<?x2xi32>) fallback(%[[FB]] : memref<?x2xi32>) stats(%[[ST]] : memref<?x4x5xf32>) early(%[[EARLY]] : memref<?x2xi32>) {anchor = 1 : i64, base_units = 4 : i64, page_size = 16 : i64, tau = 1.000000e-04 : f64, window = 64 : i64, window_max = 64 : i64}
// CHECK: condensate.sparse_attend page {{.*}} indices(%[[IDX]] : memref<?x2x12xi32>) limits(%[[EXTRA]] : memref<?x2xi32>) partials(%[[PO2:.*]], %[[PML2:.*]] : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 1 : i64, count = 8 : i64, first = 4 : i64, include_forced = false,
// CHECK: condensate.dense_attend {{.*}} mask(%[[FB]] : memref<?x2xi32>) partials(%[[POD:.*]], %[[PMLD:.*]] : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// CHECK-NEXT: condensate.merge partials(%[[PO]], %[[PML]], %[[PO2]], %[[PML2]] : {{.*}}) fallback(%[[FB]] : memref<?x2xi32>) dense(%[[POD]], %[[PMLD]] : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) out(%arg6 : memref<?x4x16xf32>) stats(%[[ST]] : memref<?x4x5xf32>){{$}}
// SPLITS-LABEL: func.func @certified
// SPLITS: condensate.dense_attend {{.*}} mask(%{{.*}} : memref<?x2xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// CHECK-COUNT-12: memref.dealloc
// CHECK-NEXT: return
func.func @certified(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 64, topk = 64, tau = 1.0e-4, max_extra = 8>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 4, extra_units = 8, splits = 1, target = cpu>}
  return
}

// -----

// A certified exact (token) selector with stats and summaries: the value
// box still comes from the page summaries (of the pages holding omitted
// tokens), so certify reads them through the page table.
// CHECK-LABEL: func.func @certified_token
// CHECK: condensate.score_tokens
// CHECK: %[[VB:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2x16xf32>
// CHECK-NEXT: condensate.certify token {{.*}} stats(%arg7 : memref<?x4x5xf32>) early(%{{.*}} : memref<?x2xi32>) summaries(%arg5 : memref<?x2x5x16xf32>) pages(%arg3 : memref<?x?xi32>) vbox(%[[VB]] : memref<?x2x2x16xf32>) {anchor = 1 : i64, base_units = 8 : i64, page_size = 16 : i64,
// CHECK: condensate.merge {{.*}} stats(%arg7 : memref<?x4x5xf32>) vbox(%[[VB]] : memref<?x2x2x16xf32>){{$}}
func.func @certified_token(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16, topk = 8, selector = exact, tau = 1.0e-3, max_extra = 4>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 8, extra_units = 4, splits = 1, target = cpu>}
  return
}

// -----

// Without summaries (legal for the exact selector) there is nothing to box
// the omitted values with: certify runs without a box and the merge reports
// the output bound as NaN (not computed).
// CHECK-LABEL: func.func @certified_token_no_summaries
// CHECK: condensate.certify token {{.*}} stats(%arg6 : memref<?x4x5xf32>) early(%{{.*}} : memref<?x2xi32>) {anchor
// CHECK: condensate.merge {{.*}} stats(%arg6 : memref<?x4x5xf32>){{$}}
func.func @certified_token_no_summaries(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16, topk = 8, selector = exact, tau = 1.0e-3, max_extra = 4>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 8, extra_units = 4, splits = 1, target = cpu>}
  return
}

// -----

// output_bound = false: the certificate bounds the omitted mass alone, so
// certify neither reads the summaries nor writes a value box, and the merge
// reports the output bound as NaN, although summaries and stats are given.
// CHECK-LABEL: func.func @certified_mass_only
// CHECK-NOT: memref<?x2x2x16xf32>
// CHECK: condensate.certify token {{.*}} stats(%arg7 : memref<?x4x5xf32>) early(%{{.*}} : memref<?x2xi32>) {anchor
// CHECK: condensate.merge {{.*}} stats(%arg7 : memref<?x4x5xf32>){{$}}
func.func @certified_mass_only(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) {policy = #condensate.policy<anchor = 1, window = 16, topk = 8, selector = exact, tau = 1.0e-3, max_extra = 4, output_bound = false>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 8, extra_units = 4, splits = 1, target = cpu>}
  return
}

// -----

// Per-head policies: key/value head 0 (query heads 0-1) keeps a window, heads
// 1-2 (query heads 2-5) are dense; each run works on subviews of its heads.
// CHECK-LABEL: func.func @heads
// CHECK: %[[Q0:.*]] = memref.subview %arg0[0, 0, 0] [%{{.*}}, 2, 16] [1, 1, 1] : memref<?x6x16xf32> to memref<?x2x16xf32, strided<[96, 16, 1]>>
// CHECK: %[[K0:.*]] = memref.subview %arg1[0, 0, 0, 0] [%{{.*}}, 1, 16, 16] [1, 1, 1, 1] : memref<?x3x16x16xf32> to memref<?x1x16x16xf32, strided<[768, 256, 16, 1]>>
// CHECK: %[[V0:.*]] = memref.subview %arg2[0, 0, 0, 0] [%{{.*}}, 1, 16, 16]
// CHECK: %[[S0:.*]] = memref.subview %arg5[0, 0, 0, 0] [%{{.*}}, 1, 5, 16]
// CHECK: %[[O0:.*]] = memref.subview %arg6[0, 0, 0] [%{{.*}}, 2, 16]
// CHECK: %[[ST0:.*]] = memref.subview %arg7[0, 0, 0] [%{{.*}}, 2, 5]
// A plain window needs neither scores nor a certificate.
// CHECK-NOT: condensate.score_pages
// CHECK-NOT: condensate.select_topk
// CHECK: condensate.sparse_attend page q(%[[Q0]] : {{.*}}) kv(%[[K0]], %[[V0]] : memref<?x1x16x16xf32, strided<[768, 256, 16, 1]>>) {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x2x1x16xf32>, memref<?x2x1x3xf32>) {anchor = 1 : i64, count = 0 : i64,
// CHECK-NOT: condensate.certify
// CHECK: condensate.merge {{.*}} out(%[[O0]] : memref<?x2x16xf32, strided<[96, 16, 1]>>) stats(%[[ST0]] : memref<?x2x5xf32, strided<[30, 5, 1]>>) {stats_eps = 0x7FC00000 : f32}
// CHECK: %[[Q1:.*]] = memref.subview %arg0[0, 2, 0] [%{{.*}}, 4, 16] [1, 1, 1] : memref<?x6x16xf32> to memref<?x4x16xf32, strided<[96, 16, 1], offset: 32>>
// CHECK: %[[K1:.*]] = memref.subview %arg1[0, 1, 0, 0] [%{{.*}}, 2, 16, 16] [1, 1, 1, 1] : memref<?x3x16x16xf32> to memref<?x2x16x16xf32, strided<[768, 256, 16, 1], offset: 256>>
// CHECK: %[[V1:.*]] = memref.subview %arg2[0, 1, 0, 0] [%{{.*}}, 2, 16, 16]
// CHECK: %[[O1:.*]] = memref.subview %arg6[0, 2, 0] [%{{.*}}, 4, 16]
// CHECK: %[[ST1:.*]] = memref.subview %arg7[0, 2, 0] [%{{.*}}, 4, 5]
// CHECK: condensate.dense_attend q(%[[Q1]] : {{.*}}) kv(%[[K1]], %[[V1]] : {{.*}}) {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// CHECK-NEXT: condensate.merge {{.*}} out(%[[O1]] : {{.*}}) stats(%[[ST1]] : {{.*}}) {stats_eps = 0.000000e+00 : f32}
// CHECK-NOT: memref.subview
// CHECK-COUNT-4: memref.dealloc
// CHECK-NEXT: return
func.func @heads(%q: memref<?x6x16xf32>, %k: memref<?x3x16x16xf32>, %v: memref<?x3x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x3x5x16xf32>, %o: memref<?x6x16xf32>, %st: memref<?x6x5xf32>) {
  condensate.decode_attention q(%q : memref<?x6x16xf32>) kv(%k, %v : memref<?x3x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x3x5x16xf32>) out(%o : memref<?x6x16xf32>) stats(%st : memref<?x6x5xf32>) {policy = #condensate.dense, head_policies = [#condensate.policy<window = 32>, #condensate.dense, #condensate.dense], scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 6, kv_heads = 3, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// Anchor and window only: nothing to score or select.
// CHECK-LABEL: func.func @window
// CHECK-NOT: condensate.score_
// CHECK-NOT: condensate.select_topk
// CHECK: condensate.sparse_attend page q(%arg0 : memref<?x4x16xf32>) kv(%arg1, %arg2 : memref<?x2x16x16xf32>) pages(%arg3 : memref<?x?xi32>) lens(%arg4 : memref<?xi32>) partials(%{{.*}}, %{{.*}} : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 4 : i64, count = 0 : i64, first = 0 : i64, include_forced = true, scale = 2.500000e-01 : f32, window = 60 : i64, window_max = 60 : i64}
// CHECK-NEXT: condensate.merge {{.*}} {stats_eps = 0x7FC00000 : f32}
// CHECK-NOT: condensate.certify
func.func @window(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 4, window = 60>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

// On a GPU target the dense splits default to about 512 blocks a sequence
// over its kv heads: 256 for these 2 (64 for 8 kv heads, 512 for 1); the
// extra pass splits its 8 pages = 128 slots into up to 4 blocks of 32.
// CHECK-LABEL: func.func @gpu
// CHECK: condensate.sparse_attend page {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) {anchor = 1 : i64, count = 4 : i64,
// CHECK: condensate.certify page
// CHECK: condensate.sparse_attend page {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) {anchor = 1 : i64, count = 8 : i64, first = 4 : i64, include_forced = false,
// CHECK: condensate.dense_attend {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x4x256x16xf32>, memref<?x4x256x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
// SPLITS-LABEL: func.func @gpu
// SPLITS: condensate.dense_attend {{.*}} partials(%{{.*}}, %{{.*}} : memref<?x4x4x16xf32>, memref<?x4x4x3xf32>) {scale = 2.500000e-01 : f32}{{$}}
func.func @gpu(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xbf16>, %v: memref<?x2x16x16xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %v : memref<?x2x16x16xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<anchor = 1, window = 256, topk = 64, tau = 1.0e-4, max_extra = 8>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = bf16, top_units = 4, extra_units = 8, splits = 3, target = sm_90>}
  return
}

// -----

// Decomposition needs the spec.
func.func @unspecialised(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op must be specialised before decomposition (run condensate-specialize)}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}
