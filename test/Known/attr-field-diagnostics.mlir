// KNOWN BUG (wrong diagnostics): a negative `window` or `layers` is reported
// as a missing field, and a policy without `window` but with `window_max` is
// reported as "window must be >= 0, got -1" (a value the user never wrote).
// Repro: condensate-opt -verify-diagnostics -split-input-file test/Known/attr-field-diagnostics.mlir
// RUN: condensate-opt %s -split-input-file -verify-diagnostics

// Today: "#condensate.policy needs a 'window' field".
// expected-error@+1 {{policy window must be >= 0, got -5}}
func.func @f() attributes {p = #condensate.policy<window = -5>} { return }

// -----

// Today: "policy window must be >= 0, got -1".
// expected-error@+1 {{#condensate.policy needs a 'window' field}}
func.func @f() attributes {p = #condensate.policy<window_max = 64>} { return }

// -----

// Today: "#condensate.schedule needs 'layers' and 'default' fields".
// expected-error@+1 {{schedule layers must be > 0, got -1}}
func.func @f() attributes {s = #condensate.schedule<layers = -1, default = #condensate.dense>} { return }
