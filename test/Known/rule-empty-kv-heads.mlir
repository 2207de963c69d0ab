// KNOWN VERIFIER HOLE: `kv_heads = []` is accepted and means "every head"
// (the printer then drops it), so a rule meant for no head, or an empty list
// left by a generator, silently applies to all heads.
// Repro: condensate-opt test/Known/rule-empty-kv-heads.mlir
// RUN: condensate-opt %s -verify-diagnostics

// expected-error@+1 {{kv_heads}}
func.func @f() attributes {r = #condensate.rule<layers = [1], kv_heads = [], policy = #condensate.dense>} { return }
