// Round trip of the condensate attributes: defaults are elided, fields print
// in a fixed order, `a to b` ranges fold and unfold, tau = 2^-24 prints as
// `strict`.
// RUN: condensate-opt %s -split-input-file | FileCheck %s
// RUN: condensate-opt %s -split-input-file | condensate-opt -split-input-file | FileCheck %s
// RUN: condensate-opt %s -split-input-file --mlir-print-op-generic | condensate-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @policy_defaults
// CHECK-SAME: p0 = #condensate.policy<anchor = 1, window = 64>,
// CHECK-SAME: p1 = #condensate.policy<anchor = 1, window = 64>,
// CHECK-SAME: p2 = #condensate.policy<anchor = 0, window = 0, topk = 8>,
// CHECK-SAME: p3 = #condensate.policy<anchor = 4, window = 8, window_max = 32, topk = 5, selector = exact, page_size = 1024, tau = 2.500000e-01, max_extra = 3>,
// CHECK-SAME: p4 = #condensate.policy<anchor = 1, window = 0>
// CHECK-SAME: {
func.func @policy_defaults() attributes {
  // Only the window: every other field takes its default.
  p0 = #condensate.policy<window = 64>,
  // Every default written out: all of them are elided in printing.
  p1 = #condensate.policy<anchor = 1, window = 64, window_max = 64, topk = 0,
                          selector = block_minmax, page_size = 16, tau = 0.0,
                          max_extra = 0>,
  // Fields in any order; anchor = 0 is printed.
  p2 = #condensate.policy<topk = 8, window = 0, anchor = 0>,
  // No default: every field printed, in the canonical order.
  p3 = #condensate.policy<max_extra = 3, tau = 0.25, page_size = 1024,
                          selector = exact, topk = 5, window_max = 32,
                          window = 8, anchor = 4>,
  p4 = #condensate.policy<anchor = 1, window = 0>} {
  return
}

// -----

// CHECK-LABEL: func.func @policy_selectors
// CHECK-SAME: a = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = exact>,
// CHECK-SAME: b = #condensate.policy<anchor = 1, window = 16, topk = 32>,
// CHECK-SAME: c = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = block_mean>,
// CHECK-SAME: d = #condensate.policy<anchor = 1, window = 16, topk = 32, page_size = 64>,
// CHECK-SAME: e = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = sketch, bits = 4>,
// CHECK-SAME: f = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = sketch, bits = 2, page_size = 64, tau = 1.000000e-03, max_extra = 64>,
// CHECK-SAME: g = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = sketch, bits = 4, tau = 5.000000e-01, max_extra = 64, output_bound = false>,
// CHECK-SAME: h = #condensate.policy<anchor = 1, window = 16, topk = 32, selector = sketch, bits = 4, tau = 5.000000e-01>
func.func @policy_selectors() attributes {
  a = #condensate.policy<window = 16, topk = 32, selector = exact>,
  b = #condensate.policy<window = 16, topk = 32, selector = block_minmax>,
  c = #condensate.policy<window = 16, topk = 32, selector = block_mean>,
  d = #condensate.policy<window = 16, topk = 32, page_size = 64>,
  e = #condensate.policy<window = 16, topk = 32, selector = sketch>,
  f = #condensate.policy<window = 16, topk = 32, selector = sketch, bits = 2, page_size = 64, tau = 1.0e-3, max_extra = 64>,
  g = #condensate.policy<output_bound = false, window = 16, topk = 32, selector = sketch, tau = 0.5, max_extra = 64>,
  h = #condensate.policy<window = 16, topk = 32, selector = sketch, tau = 0.5, output_bound = true>} {
  return
}

// -----

// CHECK-LABEL: func.func @policy_tau
// CHECK-SAME: s0 = #condensate.policy<anchor = 1, window = 64, tau = strict>,
// CHECK-SAME: s1 = #condensate.policy<anchor = 1, window = 64, tau = strict>,
// CHECK-SAME: t0 = #condensate.policy<anchor = 1, window = 64, topk = 512, tau = 1.000000e-04, max_extra = 8>,
// CHECK-SAME: t1 = #condensate.policy<anchor = 1, window = 64, tau = 9.990000e-01>,
// CHECK-SAME: t2 = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact, tau = 5.000000e-01, max_extra = 16>
func.func @policy_tau() attributes {
  s0 = #condensate.policy<window = 64, tau = strict>,
  // 2^-24 written as a number is the strict setting too.
  s1 = #condensate.policy<window = 64, tau = 5.9604644775390625e-08>,
  t0 = #condensate.policy<window = 64, topk = 512, tau = 1.0e-4, max_extra = 8>,
  t1 = #condensate.policy<window = 64, tau = 0.999>,
  t2 = #condensate.policy<window = 64, topk = 32, selector = exact, tau = 0.5,
                          max_extra = 16>} {
  return
}

// -----

// tau prints with the shortest %e that parses back to the same double, so
// print -> parse keeps the certificate's tolerance exactly (it used to be cut
// to 7 significant digits).
// CHECK-LABEL: func.func @policy_tau_round_trip
// CHECK-SAME: a = #condensate.policy<anchor = 1, window = 64, tau = 1.23456789e-05>,
// CHECK-SAME: b = #condensate.policy<anchor = 1, window = 64, tau = 3.333333333333333e-01>,
// CHECK-SAME: c = #condensate.policy<anchor = 1, window = 64, tau = 5.960464477539064e-08>,
// CHECK-SAME: d = #condensate.policy<anchor = 1, window = 64, tau = 1.000000e-01>
func.func @policy_tau_round_trip() attributes {
  a = #condensate.policy<window = 64, tau = 1.23456789e-05>,
  b = #condensate.policy<window = 64, tau = 0.3333333333333333>,
  // One double ulp above 2^-24 is not strict.
  c = #condensate.policy<window = 64, tau = 5.960464477539064e-08>,
  d = #condensate.policy<window = 64, tau = 0.1>} {
  return
}

// -----

// CHECK-LABEL: func.func @policy_adaptive
// CHECK-SAME: a = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 32, selector = exact>,
// CHECK-SAME: b = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>
func.func @policy_adaptive() attributes {
  a = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 32,
                         selector = exact>,
  // window_max == window is not adaptive: elided.
  b = #condensate.policy<anchor = 1, window = 64, window_max = 64, topk = 32,
                         selector = exact>} {
  return
}

// -----

// CHECK-LABEL: func.func @dense
// CHECK-SAME: attributes {d = #condensate.dense}
func.func @dense() attributes {d = #condensate.dense} {
  return
}

// -----

// Index lists: runs of three or more fold into `a to b`; shorter runs,
// unsorted lists and repeats print as written.
// CHECK-LABEL: func.func @rules
// CHECK-SAME: r0 = #condensate.rule<layers = [0 to 3, 5, 7 to 9], policy = #condensate.dense>,
// CHECK-SAME: r1 = #condensate.rule<layers = [1, 2], policy = #condensate.dense>,
// CHECK-SAME: r2 = #condensate.rule<layers = [0 to 2], policy = #condensate.dense>,
// CHECK-SAME: r3 = #condensate.rule<layers = [3, 1, 1], policy = #condensate.dense>,
// CHECK-SAME: r4 = #condensate.rule<layers = [2], kv_heads = [0, 1], policy = #condensate.policy<anchor = 1, window = 1024>>,
// CHECK-SAME: r5 = #condensate.rule<layers = [4 to 6], kv_heads = [2 to 5, 7], policy = #condensate.policy<anchor = 1, window = 64, topk = 32, selector = exact>>
func.func @rules() attributes {
  r0 = #condensate.rule<layers = [0, 1, 2, 3, 5, 7 to 9], policy = #condensate.dense>,
  r1 = #condensate.rule<layers = [1 to 2], policy = #condensate.dense>,
  r2 = #condensate.rule<policy = #condensate.dense, layers = [0, 1 to 2]>,
  r3 = #condensate.rule<layers = [3, 1, 1], policy = #condensate.dense>,
  r4 = #condensate.rule<layers = [2 to 2], kv_heads = [0 to 1],
                        policy = #condensate.policy<window = 1024>>,
  r5 = #condensate.rule<kv_heads = [2, 3, 4, 5, 7], layers = [4 to 6],
                        policy = #condensate.policy<window = 64, topk = 32,
                                                    selector = exact>>} {
  return
}

// -----

// CHECK-LABEL: func.func @schedules
// CHECK-SAME: s0 = #condensate.schedule<layers = 1, default = #condensate.dense, rules = []>,
// CHECK-SAME: s1 = #condensate.schedule<layers = 1, default = #condensate.dense, rules = []>,
// CHECK-SAME: s1f = #condensate.schedule<layers = 1, default = #condensate.dense, rules = []>,
// CHECK-SAME: s1r = #condensate.schedule<layers = 30, depth = relative, default = #condensate.dense, rules = [#condensate.rule<layers = [15], policy = #condensate.dense>]>,
// CHECK-SAME: s2 = #condensate.schedule<layers = 30, default = #condensate.policy<anchor = 1, window = 64, window_max = 256, topk = 32, selector = exact>, rules = [#condensate.rule<layers = [0 to 7], policy = #condensate.policy<anchor = 1, window = 1024>>, #condensate.rule<layers = [15], policy = #condensate.dense>, #condensate.rule<layers = [20, 21], kv_heads = [2], policy = #condensate.policy<anchor = 0, window = 16, topk = 1024>>]>
func.func @schedules() attributes {
  s0 = #condensate.schedule<layers = 1, default = #condensate.dense, rules = []>,
  // `rules` may be left out.
  s1 = #condensate.schedule<default = #condensate.dense, layers = 1>,
  // `depth = fixed` is the default and is not printed; `relative` is.
  s1f = #condensate.schedule<layers = 1, depth = fixed, default = #condensate.dense>,
  s1r = #condensate.schedule<depth = relative, layers = 30, default = #condensate.dense,
    rules = [#condensate.rule<layers = [15], policy = #condensate.dense>]>,
  s2 = #condensate.schedule<layers = 30,
    default = #condensate.policy<anchor = 1, window = 64, window_max = 256,
                                 topk = 32, selector = exact>,
    rules = [
      #condensate.rule<layers = [0 to 7],
                       policy = #condensate.policy<anchor = 1, window = 1024>>,
      #condensate.rule<layers = [15], policy = #condensate.dense>,
      #condensate.rule<layers = [20, 21], kv_heads = [2],
                       policy = #condensate.policy<anchor = 0, window = 16,
                                                   topk = 1024>>
    ]>} {
  return
}

// -----

// CHECK-LABEL: func.func @specs
// CHECK-SAME: c = #condensate.spec<head_dim = 64, q_heads = 9, kv_heads = 3, page_size = 16, kv_type = f16, top_units = 2, extra_units = 0, splits = 2, target = cpu>,
// CHECK-SAME: g = #condensate.spec<head_dim = 128, q_heads = 32, kv_heads = 8, page_size = 64, kv_type = bf16, top_units = 16, extra_units = 8, splits = 32, target = sm_90>,
// CHECK-SAME: h = #condensate.spec<head_dim = 8, q_heads = 1, kv_heads = 1, page_size = 1, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = sm_80>
func.func @specs() attributes {
  c = #condensate.spec<head_dim = 64, q_heads = 9, kv_heads = 3, page_size = 16,
                       kv_type = f16, top_units = 2, extra_units = 0,
                       splits = 2, target = cpu>,
  g = #condensate.spec<head_dim = 128, q_heads = 32, kv_heads = 8,
                       page_size = 64, kv_type = bf16, top_units = 16,
                       extra_units = 8, splits = 32, target = sm_90>,
  h = #condensate.spec<head_dim = 8, q_heads = 1, kv_heads = 1, page_size = 1,
                       kv_type = f32, top_units = 0, extra_units = 0,
                       splits = 1, target = sm_80>} {
  return
}

// -----

// The enum attributes on their own.
// CHECK-LABEL: func.func @enums
// CHECK-SAME: g0 = #condensate<granularity token>, g1 = #condensate<granularity page>,
// CHECK-SAME: s0 = #condensate<selector exact>, s1 = #condensate<selector block_minmax>, s2 = #condensate<selector block_mean>,
// CHECK-SAME: t0 = #condensate<target cpu>, t1 = #condensate<target sm_80>, t2 = #condensate<target sm_90>
func.func @enums() attributes {
  g0 = #condensate<granularity token>, g1 = #condensate<granularity page>,
  s0 = #condensate<selector exact>, s1 = #condensate<selector block_minmax>,
  s2 = #condensate<selector block_mean>, t0 = #condensate<target cpu>,
  t1 = #condensate<target sm_80>, t2 = #condensate<target sm_90>} {
  return
}

// -----

// Attributes carried by a model: the schedule inside keeps its rules and
// per-head overrides.
// CHECK-LABEL: condensate.model @carried
// CHECK-SAME: schedule = <layers = 8, default = #condensate.policy<anchor = 1, window = 32, topk = 64, page_size = 32, tau = strict, max_extra = 2>, rules = [#condensate.rule<layers = [0, 1], policy = #condensate.dense>, #condensate.rule<layers = [2 to 7], kv_heads = [1], policy = #condensate.policy<anchor = 2, window = 30, window_max = 62, page_size = 32>>]>
condensate.model @carried layers = 8, q_heads = 4, kv_heads = 2, head_dim = 32,
    page_size = 32, kv_type = f32,
    schedule = #condensate.schedule<layers = 8,
      default = #condensate.policy<window = 32, topk = 64, page_size = 32,
                                   tau = strict, max_extra = 2>,
      rules = [#condensate.rule<layers = [0, 1], policy = #condensate.dense>,
               #condensate.rule<layers = [2 to 7], kv_heads = [1],
                 policy = #condensate.policy<anchor = 2, window = 30,
                                             window_max = 62, page_size = 32>>]>

// -----

// The largest index a list may name is 1023.
// CHECK-LABEL: func.func @largest_indices
// CHECK-SAME: r = #condensate.rule<layers = [1020 to 1023], policy = #condensate.dense>
// CHECK-SAME: s = #condensate.rule<layers = [0, 1023], policy = #condensate.dense>
func.func @largest_indices() attributes {r = #condensate.rule<layers = [1020 to 1023], policy = #condensate.dense>, s = #condensate.rule<layers = [0, 1023], policy = #condensate.dense>} { return }
