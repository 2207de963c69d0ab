// Every diagnostic of the condensate attributes and ops, one case each.
// The memory cap turns a regression of the `a to b` overflow check (which
// used to loop pushing indices until memory ran out) into a quick failure.
// RUN: %ulimit_v 4000000; condensate-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// #condensate.policy
//===----------------------------------------------------------------------===//

// expected-error@+1 {{unknown policy field 'windows'; expected one of: anchor, window, window_max, topk, selector, page_size, tau, max_extra, bits, output_bound}}
func.func @f() attributes {p = #condensate.policy<windows = 64>} { return }

// -----

// expected-error@+1 {{duplicate policy field 'window'}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 8, window = 32>} { return }

// -----

// expected-error@+1 {{unknown selector 'top_k'; expected exact, block_minmax, block_mean or sketch}}
func.func @f() attributes {p = #condensate.policy<window = 64, selector = top_k>} { return }

// -----

// expected-error@+1 {{policy bits of a sketch must be 2, 4 or 8, got 3}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 8, selector = sketch, bits = 3>} { return }

// -----

// expected-error@+1 {{policy bits = 4 needs selector = sketch}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 8, selector = exact, bits = 4>} { return }

// -----

// expected-error@+1 {{sketch policies of one schedule must use the same bits}}
func.func @f() attributes {s = #condensate.schedule<layers = 2, default = #condensate.policy<window = 8, topk = 8, selector = sketch, bits = 4>, rules = [#condensate.rule<layers = [1], policy = #condensate.policy<window = 8, topk = 8, selector = sketch, bits = 8>>]>} { return }

// -----

// expected-error@+1 {{'condensate.model' op the schedule's sketch policies use 4 bits but the cache carries 2-bit sketches}}
condensate.model @m layers = 1, q_heads = 2, kv_heads = 1, head_dim = 16, page_size = 16, kv_type = f32, sketch_bits = 2, schedule = #condensate.schedule<layers = 1, default = #condensate.policy<window = 8, topk = 8, selector = sketch, bits = 4>, rules = []>

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_sketch' op operand 'summaries' dimension 2 must be 7, got 5}}
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%kn: memref<?x2x16xf32>, %vn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %pos: memref<?xi32>, %s: memref<?x2x5x16xf32>) {
  // expected-error@+1 {{'condensate.append_kv' op operand 'summaries' must have 7 rows (page size 16, 4-bit sketches), got 5}}
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x2x16xf32>) into(%k, %v : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) {sketch_bits = 4 : i64}
  return
}

// -----

// expected-error@+1 {{#condensate.policy needs a 'window' field}}
func.func @f() attributes {p = #condensate.policy<anchor = 1, topk = 32>} { return }

// -----

// expected-error@+1 {{#condensate.policy needs a 'window' field}}
func.func @f() attributes {p = #condensate.policy<>} { return }

// -----

// expected-error@+1 {{policy anchor must be >= 0, got -1}}
func.func @f() attributes {p = #condensate.policy<anchor = -1, window = 64>} { return }

// -----

// expected-error@+1 {{policy window must be >= 0, got -4}}
func.func @f() attributes {p = #condensate.policy<window = -4, window_max = 8>} { return }

// -----

// A negative window on its own is reported as such, not as a missing field.
// expected-error@+1 {{policy window must be >= 0, got -5}}
func.func @f() attributes {p = #condensate.policy<window = -5>} { return }

// -----

// window_max without window: the field is missing (no made-up "-1").
// expected-error@+1 {{#condensate.policy needs a 'window' field}}
func.func @f() attributes {p = #condensate.policy<window_max = 64>} { return }

// -----

// expected-error@+1 {{policy window_max (32) must be >= window (64)}}
func.func @f() attributes {p = #condensate.policy<window = 64, window_max = 32>} { return }

// -----

// expected-error@+1 {{policy topk must be >= 0, got -32}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = -32>} { return }

// -----

// expected-error@+1 {{policy attends to nothing: anchor, window and topk are all 0}}
func.func @f() attributes {p = #condensate.policy<anchor = 0, window = 0>} { return }

// -----

// expected-error@+1 {{policy page_size must be a power of two in [1, 1024], got 48}}
func.func @f() attributes {p = #condensate.policy<window = 64, page_size = 48>} { return }

// -----

// expected-error@+1 {{policy page_size must be a power of two in [1, 1024], got 2048}}
func.func @f() attributes {p = #condensate.policy<window = 64, page_size = 2048>} { return }

// -----

// expected-error@+1 {{policy page_size must be a power of two in [1, 1024], got 0}}
func.func @f() attributes {p = #condensate.policy<window = 64, page_size = 0>} { return }

// -----

// expected-error@+1 {{policy tau must be in [0, 1), got 1}}
func.func @f() attributes {p = #condensate.policy<window = 64, tau = 1.0>} { return }

// -----

// expected-error@+1 {{policy tau must be in [0, 1), got -1.000000e-03}}
func.func @f() attributes {p = #condensate.policy<window = 64, tau = -1.0e-3>} { return }

// -----

// expected-error@+1 {{policy tau must be in [0, 1), got nan}}
func.func @f() attributes {p = #condensate.policy<window = 64, tau = 0x7FF8000000000000>} { return }

// -----

// expected-error@+1 {{policy max_extra must be >= 0, got -2}}
func.func @f() attributes {p = #condensate.policy<window = 64, tau = 0.5, max_extra = -2>} { return }

// -----

// expected-error@+1 {{policy max_extra = 8 needs a certified policy (tau > 0)}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 32, max_extra = 8>} { return }

// -----

// expected-error@+1 {{policy output_bound = false needs a certified policy (tau > 0)}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 32, output_bound = false>} { return }

// -----

// expected-error@+1 {{policy output_bound must be true or false}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 32, tau = 0.5, output_bound = 0>} { return }

//===----------------------------------------------------------------------===//
// #condensate.rule
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{unknown rule field 'heads'; expected one of: layers, kv_heads, policy}}
func.func @f() attributes {r = #condensate.rule<layers = [0], heads = [1], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{duplicate rule field 'layers'}}
func.func @f() attributes {r = #condensate.rule<layers = [0], layers = [1], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{#condensate.rule needs both 'layers' and 'policy' fields}}
func.func @f() attributes {r = #condensate.rule<layers = [0]>} { return }

// -----

// expected-error@+1 {{#condensate.rule needs both 'layers' and 'policy' fields}}
func.func @f() attributes {r = #condensate.rule<policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{empty range 7 to 3}}
func.func @f() attributes {r = #condensate.rule<layers = [7 to 3], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{index 2000000 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [0 to 2000000], policy = #condensate.dense>} { return }

// -----

// Indices are checked before a range is expanded: the largest is 1023.
// expected-error@+1 {{index 1024 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [5 to 1024], policy = #condensate.dense>} { return }

// -----

// A list may name at most 1024 indices, ranges and repeats included.
// expected-error@+1 {{the list names more than 1024 indices}}
func.func @f() attributes {r = #condensate.rule<layers = [0 to 1023, 0], policy = #condensate.dense>} { return }

// -----

// A span that overflows int64 is rejected up front (it used to wrap, pass
// the size check and loop until memory ran out).
// expected-error@+1 {{index -2 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [-2 to 9223372036854775807], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{index 9223372036854775807 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [9223372036854775806 to 9223372036854775807], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{index -3 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [0], kv_heads = [-3 to -1], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{rule must name at least one layer}}
func.func @f() attributes {r = #condensate.rule<layers = [], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{index -1 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [0, -1], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{index -3 is out of bounds (indices are in [0, 1024))}}
func.func @f() attributes {r = #condensate.rule<layers = [0], kv_heads = [1, -3], policy = #condensate.dense>} { return }

// -----

// An empty kv_heads list used to mean "every head" (and printed without it).
// expected-error@+1 {{#condensate.rule kv_heads must not be empty (omit it to cover every head)}}
func.func @f() attributes {r = #condensate.rule<layers = [1], kv_heads = [], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{rule policy must be #condensate.policy or #condensate.dense, got 5 : i64}}
func.func @f() attributes {r = #condensate.rule<layers = [0], policy = 5>} { return }

// -----

// expected-error@+1 {{rule policy must be #condensate.policy or #condensate.dense, got #condensate.rule<layers = [1], policy = #condensate.dense>}}
func.func @f() attributes {r = #condensate.rule<layers = [0], policy = #condensate.rule<layers = [1], policy = #condensate.dense>>} { return }

//===----------------------------------------------------------------------===//
// #condensate.schedule
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{unknown schedule field 'num_layers'; expected one of: layers, depth, default, rules}}
func.func @f() attributes {s = #condensate.schedule<num_layers = 4, default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{schedule depth must be 'relative' or 'fixed', got 'deep'}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, depth = deep, default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{duplicate schedule field 'default'}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, default = #condensate.dense, default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{#condensate.schedule needs 'layers' and 'default' fields}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, rules = []>} { return }

// -----

// expected-error@+1 {{#condensate.schedule needs 'layers' and 'default' fields}}
func.func @f() attributes {s = #condensate.schedule<default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{schedule layers must be in [1, 1024], got 0}}
func.func @f() attributes {s = #condensate.schedule<layers = 0, default = #condensate.dense>} { return }

// -----

// A negative layer count is reported as such, not as a missing field.
// expected-error@+1 {{schedule layers must be in [1, 1024], got -1}}
func.func @f() attributes {s = #condensate.schedule<layers = -1, default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{schedule default must be #condensate.policy or #condensate.dense, got "dense"}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, default = "dense">} { return }

// -----

// expected-error@+1 {{expected #condensate.rule, got #condensate.dense}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, default = #condensate.dense, rules = [#condensate.dense]>} { return }

// -----

// expected-error@+1 {{schedule rule 1 names layer 4 but the schedule has 4 layers}}
func.func @f() attributes {s = #condensate.schedule<layers = 4, default = #condensate.dense, rules = [#condensate.rule<layers = [0], policy = #condensate.dense>, #condensate.rule<layers = [2 to 4], policy = #condensate.dense>]>} { return }

//===----------------------------------------------------------------------===//
// #condensate.spec
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{spec head_dim must be a positive multiple of 8 up to 512, got 60}}
func.func @f() attributes {s = #condensate.spec<head_dim = 60, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec head_dim must be a positive multiple of 8 up to 512, got 1024}}
func.func @f() attributes {s = #condensate.spec<head_dim = 1024, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec head counts must be > 0, got q_heads = 4, kv_heads = 0}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 0, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec q_heads (9) must be a multiple of kv_heads (2)}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 9, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec page_size must be a power of two in [1, 1024], got 24}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 24, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec kv_type must be f32, f16 or bf16, got 'f64'}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f64, top_units = 2, extra_units = 0, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec top_units and extra_units must be >= 0}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = -1, splits = 1, target = cpu>} { return }

// -----

// expected-error@+1 {{spec splits must be in [1, 4096], got 0}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 0, target = cpu>} { return }

// -----

// expected-error@+1 {{spec splits must be in [1, 4096], got 4097}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 4097, target = cpu>} { return }

// -----

// expected-error@+2 {{expected one of [cpu, sm_80, sm_90] for the machine a specialised kernel is generated for, got: sm_75}}
// expected-error@+1 {{failed to parse Condensate_SpecAttr parameter 'target'}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = sm_75>} { return }

//===----------------------------------------------------------------------===//
// condensate.model
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{'condensate.model' op layers must be in [1, 1024], got 0}}
condensate.model @m layers = 0, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op head counts must be in [1, 1024], got 0 / 2}}
condensate.model @m layers = 1, q_heads = 0, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op GQA ratio: 9 query heads is not a multiple of 2 key/value heads}}
condensate.model @m layers = 1, q_heads = 9, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op head_dim must be a positive multiple of 8 up to 512, got 12}}
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 12, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op page_size must be a power of two, got 12}}
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 12, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op kv_type must be f32, f16 or bf16, got 'i8'}}
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = i8, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op scale must be finite and > 0, got -1.250000e-01}}
condensate.model @m layers = 1, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, scale = -0.125, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op schedule is for 30 layers but the model has 32}}
condensate.model @m layers = 32, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 30, default = #condensate.dense>

// -----

// expected-error@+1 {{'condensate.model' op schedule rule 1 names kv_head 2 but the model has 2 key/value heads}}
condensate.model @m layers = 4, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 4, default = #condensate.dense, rules = [#condensate.rule<layers = [0], kv_heads = [1], policy = #condensate.dense>, #condensate.rule<layers = [1], kv_heads = [0 to 2], policy = #condensate.dense>]>

// -----

// The default block policy's page_size (16) is not the model's; layer 0 is
// dense, so layer 1 is the first that uses it. (An exact policy ranks tokens
// and is not checked: see ops.mlir.)
// expected-error@+1 {{'condensate.model' op layer 1 policy page_size 16 does not match the model's page_size 64}}
condensate.model @m layers = 4, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 64, kv_type = f32, schedule = #condensate.schedule<layers = 4, default = #condensate.policy<window = 64, topk = 32, selector = block_mean>, rules = [#condensate.rule<layers = [0], policy = #condensate.dense>]>

// -----

// expected-error@+1 {{custom op 'condensate.model' invalid kind of attribute specified}}
condensate.model @m layers = 4, q_heads = 4, kv_heads = 2, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.dense

//===----------------------------------------------------------------------===//
// condensate.decode_attention
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: memref<?x4xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand 'q' must have rank 3 (B x Hq x D), got 'memref<?x4xf32>'}}
  condensate.decode_attention q(%q : memref<?x4xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32, strided<[128, 32, 2]>>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand 'q' must be strided with unit stride in its last dimension, got 'memref<?x4x16xf32, strided<[128, 32, 2]>>'}}
  condensate.decode_attention q(%q : memref<?x4x16xf32, strided<[128, 32, 2]>>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x32xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_dim mismatch: 'q' has 16 but 'out' has 32}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x32xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x32xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_dim mismatch: 'q' has 16 but 'k_cache' has 32}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x32xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<2x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<3x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op batch size mismatch: 'q' has 2 but 'page_table' has 3}}
  condensate.decode_attention q(%q : memref<2x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<3x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x8x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op query head count mismatch: 'q' has 4 but 'out' has 8}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x8x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x4x5x16xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op key/value head count mismatch: 'k_cache' has 2 but 'summaries' has 4}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x4x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<100x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<64x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op page pool size mismatch: 'k_cache' has 100 but 'summaries' has 64}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<100x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<64x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x4x16xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand 'summaries' must have at least 5 rows, got 4}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x4x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

// The stats of before the output bound (4 entries) are rejected.
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>, %st: memref<?x4x4xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand 'stats' dimension 2 must be 5, got 4}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x4xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x6x16xf32>, %k: memref<?x4x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x6x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op GQA ratio: 6 query heads is not a multiple of 4 key/value heads}}
  condensate.decode_attention q(%q : memref<?x6x16xf32>) kv(%k, %k : memref<?x4x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x6x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

// k and v of different types are only expressible in the generic form; the
// AllTypesMatch trait reports them.
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op failed to verify that all of {k_cache, v_cache} have same type}}
  "condensate.decode_attention"(%q, %k, %v, %pt, %len, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 1, 0>, policy = #condensate.dense, scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x16x16xf32>, memref<?x2x16x16xf16>, memref<?x?xi32>, memref<?xi32>, memref<?x4x16xf32>) -> ()
  return
}

// -----

func.func @f(%q: memref<?x4x16xf16>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand #0 must be memref of 32-bit float values, but got 'memref<?x4x16xf16>'}}
  condensate.decode_attention q(%q : memref<?x4x16xf16>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf64>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op operand #1 must be 4D memref of 32-bit float or 16-bit float or bfloat16 type values, but got 'memref<?x2x16x16xf64>'}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf64>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op scale must be finite and > 0, got 0}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.0 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op scale must be finite and > 0, got INF}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0x7F800000 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy must be #condensate.policy or #condensate.dense, got #condensate<selector exact>}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate<selector exact>, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy page_size 64 does not match the KV cache page size 16}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, page_size = 64>, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy uses selector block_minmax, which needs the 'summaries' operand}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, topk = 32>, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy uses selector block_mean, which needs the 'summaries' operand}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, topk = 32, selector = block_mean>, scale = 0.25 : f32}
  return
}

// -----

// A certificate needs page bounds even without top-k.
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy uses selector block_minmax, which needs the 'summaries' operand}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, tau = 1.0e-3>, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op policy has an adaptive window (64 to 256), which needs the 'windows' operand}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 64, window_max = 256, topk = 32, selector = exact>, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_policies has 3 entries but there are 2 key/value heads}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.dense, #condensate.dense, #condensate.dense], scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_policies[1] must be #condensate.policy or #condensate.dense, got unit}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.dense, unit], scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_policies[1] has an adaptive window (8 to 16), which needs the 'windows' operand}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.dense, #condensate.policy<window = 8, window_max = 16>], scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op head_policies[0] page_size 32 does not match the KV cache page size 16}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.policy<window = 8, page_size = 32>, #condensate.dense], scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec head_dim 32 does not match the operands' 16}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 32, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec q_heads 8 does not match the operands' 4}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 8, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec kv_heads 1 does not match the operands' 2}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 1, page_size = 16, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec page_size 64 does not match the operands' 16}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 64, kv_type = f32, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op spec kv_type 'f16' does not match the cache element type 'f32'}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f16, top_units = 0, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op budget mismatch: the policy of kv head 1 keeps 3 units (topk 33, unit 16 tokens) but spec top_units is 2}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, head_policies = [#condensate.dense, #condensate.policy<window = 16, topk = 33>], scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op budget mismatch: the policy of kv head 0 keeps 32 units (topk 32, unit 1 tokens) but spec top_units is 31}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 16, topk = 32, selector = exact>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 31, extra_units = 0, splits = 1, target = cpu>}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op budget mismatch: the policy of kv head 0 allows 8 extra units but spec extra_units is 4}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 16, topk = 32, tau = 1.0e-4, max_extra = 8>, scale = 0.25 : f32, spec = #condensate.spec<head_dim = 16, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 4, splits = 1, target = cpu>}
  return
}

//===----------------------------------------------------------------------===//
// condensate.prefill_attention
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x3x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %rs: memref<?xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op GQA ratio: 4 query heads is not a multiple of 3 key/value heads}}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x3x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>) out(%q : memref<?x4x16xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<3xi32>, %rs: memref<3xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op row_starts must have one more entry than lens (4), got 3}}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<3xi32>) rows(%rs : memref<3xi32>) out(%q : memref<?x4x16xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<2x?xi32>, %len: memref<3xi32>, %rs: memref<?xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op dimension S mismatch: 'page_table' has 2 but 'lens' has 3}}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<2x?xi32>) lens(%len : memref<3xi32>) rows(%rs : memref<?xi32>) out(%q : memref<?x4x16xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %rs: memref<?xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op anchor = 2 needs a window (window = 0 attends to every earlier position)}}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>) out(%q : memref<?x4x16xf32>) {scale = 0.25 : f32, anchor = 2}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %rs: memref<?xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op window must be >= 0, got -1}}
  condensate.prefill_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>) out(%q : memref<?x4x16xf32>) {scale = 0.25 : f32, window = -1}
  return
}

// -----

func.func @f(%q: memref<?x4x12xf32>, %k: memref<?x2x16x12xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %rs: memref<?xi32>) {
  // expected-error@+1 {{'condensate.prefill_attention' op head_dim must be a multiple of 8, got 12}}
  condensate.prefill_attention q(%q : memref<?x4x12xf32>) kv(%k, %k : memref<?x2x16x12xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) rows(%rs : memref<?xi32>) out(%q : memref<?x4x12xf32>) {scale = 0.25 : f32}
  return
}

//===----------------------------------------------------------------------===//
// condensate.append_kv
//===----------------------------------------------------------------------===//

// -----

func.func @f(%kn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>, %s: memref<?x2x5x32xf32>) {
  // expected-error@+1 {{'condensate.append_kv' op head_dim mismatch: 'k_new' has 16 but 'summaries' has 32}}
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%kn : memref<?x2x16xf32>) into(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x5x32xf32>)
  return
}

// -----

func.func @f(%kn: memref<?x2x16xf32>, %vn: memref<?x3x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op key/value head count mismatch: 'k_new' has 2 but 'v_new' has 3}}
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%vn : memref<?x3x16xf32>) into(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>)
  return
}

// -----

func.func @f(%kn: memref<4x2x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<8xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op batch size mismatch: 'k_new' has 4 but 'positions' has 8}}
  condensate.append_kv k(%kn : memref<4x2x16xf32>) v(%kn : memref<4x2x16xf32>) into(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<8xi32>)
  return
}

// -----

func.func @f(%kn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op operand 'page_table' must have rank 2 (B x MP), got 'memref<?xi32>'}}
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%kn : memref<?x2x16xf32>) into(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?xi32>) positions(%pos : memref<?xi32>)
  return
}

// -----

func.func @f(%kn: memref<?x2x16xf32>, %k: memref<?x2x16x16xf16>, %v: memref<?x2x16x16xbf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op failed to verify that all of {k_cache, v_cache} have same type}}
  "condensate.append_kv"(%kn, %kn, %k, %v, %pt, %pos) : (memref<?x2x16xf32>, memref<?x2x16xf32>, memref<?x2x16x16xf16>, memref<?x2x16x16xbf16>, memref<?x?xi32>, memref<?xi32>) -> ()
  return
}

// -----

func.func @f(%kn: memref<?x?x16xf32>, %k: memref<?x?x16x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op key/value head count must be static in a stage op (run condensate-specialize)}}
  condensate.append_kv k(%kn : memref<?x?x16xf32>) v(%kn : memref<?x?x16xf32>) into(%k, %k : memref<?x?x16x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>)
  return
}

// -----

func.func @f(%kn: memref<?x2x16xf32>, %k: memref<?x2x?x16xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op page size must be static in a stage op (run condensate-specialize)}}
  condensate.append_kv k(%kn : memref<?x2x16xf32>) v(%kn : memref<?x2x16xf32>) into(%k, %k : memref<?x2x?x16xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>)
  return
}

// -----

func.func @f(%kn: memref<?x2x20xf32>, %k: memref<?x2x16x20xf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>) {
  // expected-error@+1 {{'condensate.append_kv' op head_dim must be a multiple of 8, got 20}}
  condensate.append_kv k(%kn : memref<?x2x20xf32>) v(%kn : memref<?x2x20xf32>) into(%k, %k : memref<?x2x16x20xf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>)
  return
}

//===----------------------------------------------------------------------===//
// condensate.score_pages / condensate.score_tokens
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op selector exact scores tokens; use condensate.score_tokens}}
  condensate.score_pages exact q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x8xi32>, %len: memref<?xi32>, %sc: memref<?x4x9xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op pages-per-sequence mismatch: 'page_table' has 8 but 'scores' has 9}}
  condensate.score_pages block_minmax q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x8xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x9xf32>) {page_size = 16 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x6x16xf32>, %s: memref<?x4x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x6x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op GQA ratio: 6 query heads is not a multiple of 4 key/value heads}}
  condensate.score_pages block_mean q(%q : memref<?x6x16xf32>) summaries(%s : memref<?x4x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x6x?xf32>) {page_size = 16 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op page_size must be a power of two, got 20}}
  condensate.score_pages block_minmax q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 20 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x8xi32>, %len: memref<?xi32>, %sc: memref<?x4x64xf32>) {
  // expected-error@+1 {{'condensate.score_tokens' op scores must hold MP * P = 128 tokens per head, got 64}}
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf32>) pages(%pt : memref<?x8xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x64xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_tokens' op scale must be finite and > 0, got -1}}
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = -1.0 : f32}
  return
}

// -----

// Scores hold a row per query head or per key/value head (the group's max).
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x3x?xf32>) {
  // expected-error@+1 {{'condensate.score_tokens' op operand 'scores' dimension 1 must be the query heads (4) or the key/value heads (2, each its group's max), got 3}}
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x3x?xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>, %pt: memref<?x8xi32>, %len: memref<?xi32>, %sc: memref<?x2x128xf32>, %w: memref<?x4x8xf32>) {
  // expected-error@+1 {{'condensate.score_sketch' op 'widths' needs scores of one row per query head}}
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x8xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x2x128xf32>) widths(%w : memref<?x4x8xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>, %pt: memref<?x8xi32>, %len: memref<?xi32>, %sc: memref<?x4x128xf32>, %w: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.score_sketch' op pages-per-sequence mismatch: 'page_table' has 8 but 'widths' has 16}}
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x8xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x128xf32>) widths(%w : memref<?x4x16xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %s: memref<?x2x7x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x?x?xf32>) {
  // expected-error@+1 {{'condensate.score_sketch' op operand 'scores' dimension 1 must be the query heads (4) or the key/value heads (2, each its group's max), got ?}}
  condensate.score_sketch q(%q : memref<?x4x16xf32>) summaries(%s : memref<?x2x7x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x?x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.25 : f32}
  return
}

// -----

// Stage ops need the sizes their lowering unrolls on: a dynamic head count
// used to become a loop bound of -9223372036854775808.
func.func @f(%q: memref<?x?x16xf32>, %s: memref<?x?x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x?x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op query head count must be static in a stage op (run condensate-specialize)}}
  condensate.score_pages block_minmax q(%q : memref<?x?x16xf32>) summaries(%s : memref<?x?x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x?x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}

// -----

// The static query head count of 'scores' is enough.
func.func @f(%q: memref<?x?x16xf32>, %s: memref<?x?x5x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op key/value head count must be static in a stage op (run condensate-specialize)}}
  condensate.score_pages block_minmax q(%q : memref<?x?x16xf32>) summaries(%s : memref<?x?x5x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x?xf32>, %s: memref<?x2x5x?xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op head_dim must be static in a stage op (run condensate-specialize)}}
  condensate.score_pages block_mean q(%q : memref<?x4x?xf32>) summaries(%s : memref<?x2x5x?xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}

// -----

// Rows are read 8 lanes at a time: D = 4 used to crash the loop lowering.
func.func @f(%q: memref<?x4x4xf32>, %s: memref<?x2x5x4xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_pages' op head_dim must be a multiple of 8, got 4}}
  condensate.score_pages block_minmax q(%q : memref<?x4x4xf32>) summaries(%s : memref<?x2x5x4xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.5 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x?x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_tokens' op page size must be static in a stage op (run condensate-specialize)}}
  condensate.score_tokens q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x?x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x12xf32>, %k: memref<?x2x16x12xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  // expected-error@+1 {{'condensate.score_tokens' op head_dim must be a multiple of 8, got 12}}
  condensate.score_tokens q(%q : memref<?x4x12xf32>) k(%k : memref<?x2x16x12xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = 0.25 : f32}
  return
}

//===----------------------------------------------------------------------===//
// condensate.select_topk
//===----------------------------------------------------------------------===//

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op anchor must be >= 0, got -1}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = -1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op window must be >= 0, got -8}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = -8 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op window_max (32) must be >= window (64)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 32 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op page_size must be a power of two, got 0}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 0 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x?xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op indices must have a static unit count (dimension 2)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x?xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op budget mismatch: base 7 must be in [0, 6] (the index slots)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 7 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x3x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op GQA ratio: 4 query heads is not a multiple of 3 key/value heads}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x3x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<2x4x?xf32>, %len: memref<?xi32>, %w: memref<3xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op batch size mismatch: 'scores' has 2 but 'windows' has 3}}
  condensate.select_topk page scores(%sc : memref<2x4x?xf32>) lens(%len : memref<?xi32>) windows(%w : memref<3xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

// I64 attributes are read as signed: -1 no longer passes as a huge value.
func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op window_max (-1) must be >= window (64)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = -1 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op budget mismatch: base -1 must be in [0, 6] (the index slots)}}
  condensate.select_topk token scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = -1 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x?x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op query head count must be static in a stage op (run condensate-specialize)}}
  condensate.select_topk page scores(%sc : memref<?x?x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x?x6xi32>) {
  // expected-error@+1 {{'condensate.select_topk' op key/value head count must be static in a stage op (run condensate-specialize)}}
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x?x6xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

//===----------------------------------------------------------------------===//
// condensate.sparse_attend
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op budget mismatch: units [4, 8) do not fit the 6 index slots}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 4 : i64, count = 4 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op count = 4 units need the 'indices' operand}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 4 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x?x16xf32>, %pml: memref<?x4x?x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op partials must have a static split count}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x?x16xf32>, memref<?x4x?x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x3x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op dimension S mismatch: 'partial_o' has 2 but 'partial_ml' has 3}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x3x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x2xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op operand 'partial_ml' dimension 3 must be 3, got 2}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x2xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %lim: memref<?x3xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op key/value head count mismatch: 'k_cache' has 2 but 'limits' has 3}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) limits(%lim : memref<?x3xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 4 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op attends to nothing (no anchor, window or units)}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 0 : i64, window = 0 : i64, window_max = 0 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

// Without the forced slots and without units nothing is left either.
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op attends to nothing (no anchor, window or units)}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = false, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op window_max (8) must be >= window (16)}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 16 : i64, window_max = 8 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op first must be >= 0, got -1}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, first = -1 : i64, count = 2 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op count must be >= 0, got -2}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, first = 0 : i64, count = -2 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op window_max (-2) must be >= window (0)}}
  condensate.sparse_attend page q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) {anchor = 4 : i64, window = 0 : i64, window_max = -2 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x?xf32>, %k: memref<?x2x16x?xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x?xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op head_dim must be static in a stage op (run condensate-specialize)}}
  condensate.sparse_attend page q(%q : memref<?x4x?xf32>) kv(%k, %k : memref<?x2x16x?xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x?xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x12xf32>, %k: memref<?x2x16x12xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x2x12xf32>, %pml: memref<?x4x2x3xf32>) {
  // expected-error@+1 {{'condensate.sparse_attend' op head_dim must be a multiple of 8, got 12}}
  condensate.sparse_attend page q(%q : memref<?x4x12xf32>) kv(%k, %k : memref<?x2x16x12xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x2x12xf32>, memref<?x4x2x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 0 : i64, include_forced = true, scale = 0.25 : f32}
  return
}

//===----------------------------------------------------------------------===//
// condensate.dense_attend
//===----------------------------------------------------------------------===//

// -----

// The split count is the static dimension 2 of the partials (there is no
// chunk attribute any more).
func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x?x16xf32>, %pml: memref<?x4x?x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op partials must have a static split count}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x?x16xf32>, memref<?x4x?x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x16x16xf32>, %pml: memref<?x4x8x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op dimension S mismatch: 'partial_o' has 16 but 'partial_ml' has 8}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x16x16xf32>, memref<?x4x8x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %m: memref<?x4xi32>, %po: memref<?x4x16x16xf32>, %pml: memref<?x4x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op key/value head count mismatch: 'k_cache' has 2 but 'mask' has 4}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) mask(%m : memref<?x4xi32>) partials(%po, %pml : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x16x8xf32>, %pml: memref<?x4x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op head_dim mismatch: 'q' has 16 but 'partial_o' has 8}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x16x8xf32>, memref<?x4x16x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %v: memref<?x2x8x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x16x16xf32>, %pml: memref<?x4x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op failed to verify that all of {k_cache, v_cache} have same type}}
  "condensate.dense_attend"(%q, %k, %v, %pt, %len, %po, %pml) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1, 1>, scale = 2.500000e-01 : f32}> : (memref<?x4x16xf32>, memref<?x2x16x16xf32>, memref<?x2x8x16xf32>, memref<?x?xi32>, memref<?xi32>, memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) -> ()
  return
}

// -----

func.func @f(%q: memref<?x?x16xf32>, %k: memref<?x?x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x?x16x16xf32>, %pml: memref<?x?x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op query head count must be static in a stage op (run condensate-specialize)}}
  condensate.dense_attend q(%q : memref<?x?x16xf32>) kv(%k, %k : memref<?x?x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x?x16x16xf32>, memref<?x?x16x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x?x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x16x16xf32>, %pml: memref<?x4x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op page size must be static in a stage op (run condensate-specialize)}}
  condensate.dense_attend q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x?x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) {scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x4xf32>, %k: memref<?x2x16x4xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %po: memref<?x4x16x4xf32>, %pml: memref<?x4x16x3xf32>) {
  // expected-error@+1 {{'condensate.dense_attend' op head_dim must be a multiple of 8, got 4}}
  condensate.dense_attend q(%q : memref<?x4x4xf32>) kv(%k, %k : memref<?x2x16x4xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) partials(%po, %pml : memref<?x4x16x4xf32>, memref<?x4x16x3xf32>) {scale = 0.25 : f32}
  return
}

//===----------------------------------------------------------------------===//
// condensate.precertify
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  // expected-error@+1 {{'condensate.precertify' op tau must be in (0, 1), got 0}}
  condensate.precertify token q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 0.0 : f64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  // expected-error@+1 {{'condensate.precertify' op tau must be in (0, 1), got 1}}
  condensate.precertify token q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0 : f64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  // expected-error@+1 {{'condensate.precertify' op budget mismatch: base_units 7 exceeds the 6 index slots}}
  condensate.precertify token q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 7 : i64, tau = 1.0e-2 : f64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  // expected-error@+1 {{'condensate.precertify' op page_size = 32 but the key cache has pages of 16}}
  condensate.precertify token q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 32 : i64, base_units = 4 : i64, tau = 1.0e-2 : f64, scale = 0.25 : f32}
  return
}

// -----

func.func @f(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x3xi32>) {
  // expected-error@+1 {{'condensate.precertify' op key/value head count mismatch: 'k_cache' has 2 but 'early' has 3}}
  condensate.precertify token q(%q : memref<?x4x16xf32>) k(%k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x3xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-2 : f64, scale = 0.25 : f32}
  return
}

//===----------------------------------------------------------------------===//
// condensate.certify

func.func @f(%sc: memref<?x4x?xf32>, %w: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op 'widths' needs token granularity (a page width bounds each token of the page)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) widths(%w : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x128xf32>, %w: memref<?x4x4xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op widths must hold one entry per page of the 128 score slots (8 pages of 16), got 4}}
  condensate.certify token scores(%sc : memref<?x4x128xf32>) widths(%w : memref<?x4x4xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %w: memref<?x2x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op query head count mismatch: 'scores' has 4 but 'widths' has 2}}
  condensate.certify token scores(%sc : memref<?x4x?xf32>) widths(%w : memref<?x2x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op budget mismatch: base_units 7 exceeds the 6 index slots}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 7 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op tau must be in [0, 1), got 1.5}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.5 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op window_max (0) must be >= window (64)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 0 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op base_units must be >= 0, got -4}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = -4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x3xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op key/value head count mismatch: 'indices' has 2 but 'fallback' has 3}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x3xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x10xf32>, %sc2: memref<?x4x12xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op page_size must be a power of two, got 3}}
  condensate.certify page scores(%sc : memref<?x4x10xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 3 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x2x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op dimension S mismatch: 'partial_o' has 1 but 'partial_ml' has 2}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x2x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op window_max (-1) must be >= window (64)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = -1 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x?x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x?xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op key/value head count must be static in a stage op (run condensate-specialize)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x?x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x?xi32>) fallback(%e : memref<?x?xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// The value box is computed from the page summaries through the page table.
func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op 'vbox' needs the 'summaries' and 'pages' operands it is computed from}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op 'vbox' needs the 'summaries' and 'pages' operands it is computed from}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) vbox(%vb : memref<?x2x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>) {
  // expected-error@+1 {{'condensate.certify' op 'summaries' is only read to compute 'vbox', which is missing}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %pt: memref<?x?xi32>) {
  // expected-error@+1 {{'condensate.certify' op 'pages' is only read to compute 'vbox', which is missing}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) pages(%pt : memref<?x?xi32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// A box has two rows: min and max.
func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x3x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op operand 'vbox' dimension 2 must be 2, got 3}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x3x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %vb: memref<?x3x2x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op key/value head count mismatch: 'indices' has 2 but 'vbox' has 3}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x3x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x32xf32>) {
  // expected-error@+1 {{'condensate.certify' op head_dim mismatch: 'summaries' has 16 but 'vbox' has 32}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x32xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x4x16xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op operand 'summaries' must have at least 5 rows, got 4}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x4x16xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x?xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x?xf32>) {
  // expected-error@+1 {{'condensate.certify' op head_dim must be static in a stage op (run condensate-specialize)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x?xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x?xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @f(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x16xf32>, %pt: memref<?xi32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.certify' op operand 'page_table' must have rank 2 (B x MP), got 'memref<?xi32>'}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%e : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x16xf32>) pages(%pt : memref<?xi32>) vbox(%vb : memref<?x2x2x16xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

//===----------------------------------------------------------------------===//
// condensate.merge
//===----------------------------------------------------------------------===//

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op partials must be non-empty (o, ml) pairs, got 3 buffers}}
  condensate.merge partials(%po, %pml, %po : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>, memref<?x4x2x16xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op partials must be non-empty (o, ml) pairs, got 0 buffers}}
  "condensate.merge"(%o) <{operandSegmentSizes = array<i32: 0, 0, 0, 1, 0, 0>}> : (memref<?x4x16xf32>) -> ()
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x1x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op split count mismatch in pair 0: o has 2, ml has 1}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x1x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %po2: memref<?x4x1x16xf32>, %pml2: memref<?x4x4x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op split count mismatch in pair 1: o has 1, ml has 4}}
  condensate.merge partials(%po, %pml, %po2, %pml2 : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>, memref<?x4x1x16xf32>, memref<?x4x4x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x4xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op operand 'partials[1]' dimension 3 must be 3, got 4}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x4xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op dense must be one (o, ml) pair, got 4 buffers}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%po, %pml, %po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>, memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op 'fallback' and 'dense' must be given together}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) dense(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op 'fallback' and 'dense' must be given together}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %pd: memref<?x4x3x32xf32>, %pmld: memref<?x4x3x3xf32>, %f: memref<?x2xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op head_dim mismatch: 'partials[0]' has 16 but 'dense o' has 32}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pd, %pmld : memref<?x4x3x32xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %pd: memref<?x4x3x16xf32>, %pmld: memref<?x8x3x3xf32>, %f: memref<?x2xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op query head count mismatch: 'partials[0]' has 4 but 'dense ml' has 8}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pd, %pmld : memref<?x4x3x16xf32>, memref<?x8x3x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %pd: memref<?x4x3x16xf32>, %pmld: memref<?x4x3x3xf32>, %f: memref<?x3xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op GQA ratio: 4 query heads is not a multiple of 3 key/value heads}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x3xi32>) dense(%pd, %pmld : memref<?x4x3x16xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @f(%po: memref<4x4x2x16xf32>, %pml: memref<4x4x2x3xf32>, %o: memref<4x4x16xf32>, %st: memref<5x4x4xf32>) {
  // expected-error@+1 {{'condensate.merge' op batch size mismatch: 'partials[0]' has 4 but 'stats' has 5}}
  condensate.merge partials(%po, %pml : memref<4x4x2x16xf32>, memref<4x4x2x3xf32>) out(%o : memref<4x4x16xf32>) stats(%st : memref<5x4x4xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xi32>) {
  // expected-error@+1 {{'condensate.merge' op operand #2 must be memref of 32-bit float values, but got 'memref<?x4x16xi32>'}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xi32>)
  return
}

// -----

// D = 4 used to lower to nothing, D = 12 to write only lanes 0..7.
func.func @f(%po: memref<?x4x1x4xf32>, %pml: memref<?x4x1x3xf32>, %o: memref<?x4x4xf32>) {
  // expected-error@+1 {{'condensate.merge' op head_dim must be a multiple of 8, got 4}}
  condensate.merge partials(%po, %pml : memref<?x4x1x4xf32>, memref<?x4x1x3xf32>) out(%o : memref<?x4x4xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x1x12xf32>, %pml: memref<?x4x1x3xf32>, %o: memref<?x4x12xf32>) {
  // expected-error@+1 {{'condensate.merge' op head_dim must be a multiple of 8, got 12}}
  condensate.merge partials(%po, %pml : memref<?x4x1x12xf32>, memref<?x4x1x3xf32>) out(%o : memref<?x4x12xf32>)
  return
}

// -----

func.func @f(%po: memref<?x?x1x16xf32>, %pml: memref<?x?x1x3xf32>, %o: memref<?x?x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op query head count must be static in a stage op (run condensate-specialize)}}
  condensate.merge partials(%po, %pml : memref<?x?x1x16xf32>, memref<?x?x1x3xf32>) out(%o : memref<?x?x16xf32>)
  return
}

// -----

func.func @certify_dynamic_slots(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x?xi32>, %po: memref<?x4x1x16xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  // expected-error@+1 {{'condensate.certify' op indices must have a static unit count (dimension 2)}}
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x?xi32>) base(%po, %pml : memref<?x4x1x16xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

func.func @merge_dynamic_fallback(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x?xi32>, %pod: memref<?x4x16x16xf32>, %pmld: memref<?x4x16x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op fallback must have a static key/value head count (dimension 1)}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x?xi32>) dense(%pod, %pmld : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

func.func @merge_dynamic_splits(%po: memref<?x4x?x16xf32>, %pml: memref<?x4x?x3xf32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op partials must have a static split count}}
  condensate.merge partials(%po, %pml : memref<?x4x?x16xf32>, memref<?x4x?x3xf32>) out(%o : memref<?x4x16xf32>)
  return
}

// -----

// The output bound goes to stats column 4.
func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op 'vbox' needs the 'stats' operand: the output bound is written to stats[b, h, 4]}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) vbox(%vb : memref<?x2x2x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x2x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op 'vbox' (a certificate ran) and 'stats_eps' (no certificate ran) are mutually exclusive}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x2x16xf32>) {stats_eps = 0.0 : f32}
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x?x2x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op vbox must have a static key/value head count (dimension 1)}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x?x2x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %f: memref<?x2xi32>, %pod: memref<?x4x16x16xf32>, %pmld: memref<?x4x16x3xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x4x2x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op key/value head count mismatch: 'fallback' has 2 but 'vbox' has 4}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pod, %pmld : memref<?x4x16x16xf32>, memref<?x4x16x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x4x2x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x2x8xf32>) {
  // expected-error@+1 {{'condensate.merge' op head_dim mismatch: 'partials[0]' has 16 but 'vbox' has 8}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x2x8xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x3x2x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op GQA ratio: 4 query heads is not a multiple of 3 key/value heads}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x3x2x16xf32>)
  return
}

// -----

func.func @f(%po: memref<?x4x2x16xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x16xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x1x16xf32>) {
  // expected-error@+1 {{'condensate.merge' op operand 'vbox' dimension 2 must be 2, got 1}}
  condensate.merge partials(%po, %pml : memref<?x4x2x16xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x16xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x1x16xf32>)
  return
}

// -----

// Limits (condensate/ABI/Limits.h): bounded before anything is expanded.
// expected-error@+1 {{schedule layers must be in [1, 1024], got 1000000000000}}
func.func @f() attributes {s = #condensate.schedule<layers = 1000000000000, default = #condensate.dense>} { return }

// -----

// expected-error@+1 {{'condensate.model' op head counts must be in [1, 1024], got 1048576 / 1048576}}
condensate.model @m layers = 1, q_heads = 1048576, kv_heads = 1048576, head_dim = 64, page_size = 16, kv_type = f32, schedule = #condensate.schedule<layers = 1, default = #condensate.dense>

// -----

// expected-error@+1 {{policy topk must be at most 4194304, got 1099511627776}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 1099511627776, selector = exact>} { return }

// -----

// expected-error@+1 {{policy window_max must be at most 4194304, got 2147483648}}
func.func @f() attributes {p = #condensate.policy<window = 2147483648>} { return }

// -----

// expected-error@+1 {{policy anchor must be at most 4194304, got 9223372036854775807}}
func.func @f() attributes {p = #condensate.policy<anchor = 9223372036854775807, window = 1>} { return }

// -----

// max_extra is counted in units: pages of 64 here.
// expected-error@+1 {{policy max_extra must be at most 65536 units (4194304 tokens), got 1099511627776}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 64, page_size = 64, tau = 1.0e-2, max_extra = 1099511627776>} { return }
