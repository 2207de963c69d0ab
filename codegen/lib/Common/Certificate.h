//===- Certificate.h - the certificate's formulas, written once -*- C++ -*-===//
//
// The omitted-mass bound eps_hat of a certify op, as both lowerings compute
// it: the bound of one unit's mass, eps_hat = U / (Z + U) and its worst case
// over a GQA group, the walk that takes the ranked extras in until eps_hat
// is within tau, and the f32 value reported in the stats.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_CERTIFICATE_H
#define CONDENSATE_CODEGEN_COMMON_CERTIFICATE_H

#include "Emitter.h"
#include "TargetInfo.h"

namespace mlir::condensate {

/// The omitted-mass bound of one unit for one head, in f64: `count`
/// candidate positions times exp(bound + margin - m), where `bound` is the
/// unit's f32 logit bound, the margin kBoundMargin * (1 + |bound|) and m
/// the head's max logit; 0 for a unit with no candidate position.
Value unitMassBound(Emitter &e, const TargetInfo &target, Value count,
                    Value bound, Value m);

/// unitMassBound of several units at once, for targets with f64Exp (the
/// CPU's sums over every omitted unit): `counts` (their candidate
/// positions) and `bounds` are f32 vectors, m the head's max logit; the
/// terms as an f64 vector.
Value unitMassBoundLanes(Emitter &e, const TargetInfo &target, Value counts,
                         Value bounds, Value m);

/// The mass a taken extra adds to Z when the certificate has its lower
/// bounds (certify with `widths`), in f64: `count` positions times
/// exp(bound - width - margin - m), the margin kBoundMargin * (1 + |bound|
/// + width + |m|) covering the float32 rounding of the scores, the width
/// and the difference; 0 for a unit with no candidate position, and where
/// the term is not a finite number (an infinite width, an overflow: leaving
/// mass out of Z only loosens the bound).
Value unitLowerMass(Emitter &e, const TargetInfo &target, Value count,
                    Value bound, Value width, Value m);

/// eps_hat = U / (Z + U) in f64 for omitted mass U and attended mass Z; a
/// bound that overflowed (inf / inf, NaN) is 1, so it never certifies.
Value epsHat(Emitter &e, const TargetInfo &target, Value u, Value z);

/// The worst eps_hat over the heads of a group (us[i], zs[i]).
Value worstEpsHat(Emitter &e, const TargetInfo &target, ValueRange us,
                  ValueRange zs);

/// A unit's mass for one head of the group, in f64: (builder, unit, head).
using UnitMassFn = llvm::function_ref<Value(Emitter &, Value, int64_t)>;

/// The walk over the extras indices[b, g, base + j], j < extraMax, in rank
/// order: each taken extra's mass (mass(e, u, head)) leaves the omitted sums
/// `us`, and with `lowerMass` its lower bound's mass joins the attended sums
/// `zs`, until the group's worst eps_hat is within tau; it stops there, or at
/// the first empty slot, so open extras cost what the walk takes in. `done`
/// says whether it got there, `taken` how many extras that took. The sums are
/// only the walk's guide: subtracting a dominant (or infinite) term cancels the
/// rest, so the caller sums the final set's bound afresh before deciding.
struct ExtrasWalk {
  Value done;  // i1
  Value taken; // index
  /// With lowerMass: Z of each head after the taken extras' lower bounds
  /// (`zs` plus them, in slot order); otherwise `zs`.
  SmallVector<Value> zs;
};
ExtrasWalk walkExtras(Emitter &e, const TargetInfo &target, Value indices,
                      Value b, Value g, int64_t base, int64_t extraMax,
                      double tau, ValueRange us, ValueRange zs, UnitMassFn mass,
                      UnitMassFn lowerMass = nullptr);
/// The same walk over the slots [from, to) of the extras only, with `us`
/// (and `zs`) the sums after the slots before `from` moved them; `taken`
/// counts from slot 0 (it is `from` when the sums are within tau already).
ExtrasWalk walkExtrasFrom(Emitter &e, const TargetInfo &target, Value indices,
                          Value b, Value g, int64_t base, Value from, Value to,
                          double tau, ValueRange us, ValueRange zs,
                          UnitMassFn mass, UnitMassFn lowerMass = nullptr);

/// The certificate's early test (precertify) needs the units a selection
/// can still leave out after all its extras: the candidates ranked after
/// the rank-last unit of the slots, in select_topk's order (higher ranking
/// key first, the lower unit on ties). `key` is that unit's ranking key
/// (i32, compared unsigned), `unit` its index; `full` is false when a slot
/// holds no unit (fewer candidates than slots: none is left out).
struct SelectionEnd {
  Value full; // i1
  Value key;  // i32
  Value unit; // index
};
/// Whether a candidate with ranking key `key` and index u ranks after the
/// end, so that no extra can take it in.
Value ranksAfter(Emitter &e, const SelectionEnd &end, Value key, Value u);

/// eps_hat as reported in the stats: narrowed to f32 and rounded up so the
/// narrowing cannot shrink it; 0 after a fallback (attention was dense).
Value reportedEpsHat(Emitter &e, Value eps, Value fallback);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_CERTIFICATE_H
