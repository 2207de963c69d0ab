// KNOWN BUG: #condensate.policy prints tau with 7 significant digits
// ("{0:e}"), so print -> parse changes the attribute (and the certificate's
// tolerance). Expected: tau round-trips exactly.
// Repro: condensate-opt test/Known/policy-tau-precision.mlir
//   prints tau = 1.234568e-05 for tau = 1.23456789e-05.
// RUN: condensate-opt %s | FileCheck %s
// RUN: condensate-opt %s | condensate-opt | FileCheck %s

// CHECK: p = #condensate.policy<anchor = 1, window = 64, tau = 1.23456789{{0*}}e-05>
func.func @f() attributes {p = #condensate.policy<window = 64, tau = 1.23456789e-05>} {
  return
}
