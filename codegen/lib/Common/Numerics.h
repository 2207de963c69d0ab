//===- Numerics.h - condensate numerics shared by both lowerings -*- C++ -*-===//
//
// The formulas the loop and GPU lowerings must agree on, written once: the
// certificate's safety margins, a sequence's effective window and the
// candidate positions of a unit.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_NUMERICS_H
#define CONDENSATE_CODEGEN_COMMON_NUMERICS_H

#include "Emitter.h"

namespace mlir::condensate {

/// Additive safety margin, relative to 1 + |u|, applied to a unit's logit
/// bound before it enters the certificate: it covers float32 rounding in
/// the bound and in the partials, so eps_hat stays an upper bound.
constexpr double kBoundMargin = 1.0 / 16384.0;
/// Factor applied to the output-error bound: float32 sums of head_dim
/// squares are off by at most head_dim * 2^-24 relative (2^-15 at 512).
constexpr double kOutputBoundRoundUp = 1.0 + 1.0 / 4096.0;
/// Dense attention gives each split at least this many tokens: short
/// contexts use fewer splits and leave the others empty.
constexpr int64_t kMinDenseChunk = 256;

/// The effective window of sequence b: windows[b] clamped to
/// [window, window_max], or the static window.
Value effectiveWindow(Emitter &e, Value windows, Value b, int64_t window,
                      int64_t windowMax);

/// Positions of unit u that are neither anchor nor window nor past n.
Value unitCandidateCount(Emitter &e, Value u, Value unit, Value anchor,
                         Value n, Value w);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_NUMERICS_H
