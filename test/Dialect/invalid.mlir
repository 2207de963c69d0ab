// Every diagnostic of the condensate attributes and ops, one case each.
// RUN: condensate-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// #condensate.policy
//===----------------------------------------------------------------------===//

// expected-error@+1 {{unknown policy field 'windows'; expected one of: anchor, window, window_max, topk, selector, page_size, tau, max_extra}}
func.func @f() attributes {p = #condensate.policy<windows = 64>} { return }

// -----

// expected-error@+1 {{duplicate policy field 'window'}}
func.func @f() attributes {p = #condensate.policy<window = 64, topk = 8, window = 32>} { return }

// -----

// expected-error@+1 {{unknown selector 'top_k'; expected exact, block_minmax or block_mean}}
func.func @f() attributes {p = #condensate.policy<window = 64, selector = top_k>} { return }

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

// expected-error@+1 {{range 0 to 2000000 is too large}}
func.func @f() attributes {r = #condensate.rule<layers = [0 to 2000000], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{rule must name at least one layer}}
func.func @f() attributes {r = #condensate.rule<layers = [], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{rule layer index must be >= 0, got -1}}
func.func @f() attributes {r = #condensate.rule<layers = [0, -1], policy = #condensate.dense>} { return }

// -----

// expected-error@+1 {{rule kv_head index must be >= 0, got -3}}
func.func @f() attributes {r = #condensate.rule<layers = [0], kv_heads = [-3 to -1], policy = #condensate.dense>} { return }

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

// expected-error@+1 {{unknown schedule field 'num_layers'; expected one of: layers, default, rules}}
func.func @f() attributes {s = #condensate.schedule<num_layers = 4, default = #condensate.dense>} { return }

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

// expected-error@+1 {{schedule layers must be > 0, got 0}}
func.func @f() attributes {s = #condensate.schedule<layers = 0, default = #condensate.dense>} { return }

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

// expected-error@+1 {{spec splits must be > 0, got 0}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 0, target = cpu>} { return }

// -----

// expected-error@+2 {{expected one of [cpu, sm_80, sm_90] for the machine a specialised kernel is generated for, got: sm_75}}
// expected-error@+1 {{failed to parse Condensate_SpecAttr parameter 'target'}}
func.func @f() attributes {s = #condensate.spec<head_dim = 64, q_heads = 4, kv_heads = 2, page_size = 16, kv_type = f32, top_units = 2, extra_units = 0, splits = 1, target = sm_75>} { return }
