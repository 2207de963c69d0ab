// KNOWN BUG (hang / memory exhaustion): `a to b` ranges whose span overflows
// int64 pass the "too large" check (last - first wraps negative) and the
// parser then loops pushing indices until memory runs out.
// Repro: ulimit -v 2000000; condensate-opt test/Known/rule-range-overflow.mlir
//   (without the ulimit it runs until killed).
// Expected: "range -2 to 9223372036854775807 is too large".
// RUN: ulimit -v 2000000; condensate-opt %s -verify-diagnostics

// expected-error@+1 {{range -2 to 9223372036854775807 is too large}}
func.func @f() attributes {r = #condensate.rule<layers = [-2 to 9223372036854775807], policy = #condensate.dense>} { return }
