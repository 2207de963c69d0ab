// KNOWN BUG (signed overflow, minor): the `a to b` bounds check computes
// first + 2^20, which overflows (undefined behaviour) for first near
// INT64_MAX; with this build the wrapped sum rejects a 2-entry range whose
// indices are accepted when listed one by one.
// Repro: condensate-opt test/Known/rule-range-huge-indices.mlir
//   error: range 9223372036854775000 to 9223372036854775001 is out of bounds
// Expected: the span is compared as last - first (no overflow once
// first >= 0), so the range is accepted like the list.
// RUN: condensate-opt %s | FileCheck %s

// CHECK: r = #condensate.rule<layers = [9223372036854775000, 9223372036854775001], policy = #condensate.dense>
// CHECK-SAME: s = #condensate.rule<layers = [9223372036854775000, 9223372036854775001], policy = #condensate.dense>
func.func @f() attributes {r = #condensate.rule<layers = [9223372036854775000 to 9223372036854775001], policy = #condensate.dense>, s = #condensate.rule<layers = [9223372036854775000, 9223372036854775001], policy = #condensate.dense>} { return }
