//===- Sketch.h - key sketches: quantisation and per-token bounds -*- C++ -*-===//
//
// The formulas of the `sketch` selector, written once for both lowerings:
// the append quantises a full page's keys against its key box (the layout
// is AttentionABI.h's), and scoring turns a token's codes into an upper
// bound on its logit. Rows are lists of chunks (vectors of f32) as the
// callers hold them: 8-lane vectors on the CPU, a lane's slice on the GPU.
//
// Rigour. With step_c = (hi_c - lo_c) / L (L = 2^bits - 1) the append
// stores code = round((k - lo) / step), so |k - (lo + code * step)| <=
// step / 2 in exact arithmetic. Float32 evaluation moves the quotient by a
// few ulps of L <= 255 (< 2^-14 code units), the recomputed step by an ulp
// and the dequantised value by ulps of max(|lo|, |hi|); the per-channel
// error used below,
//     e_c = step_c (1/2 + 2^-10) + (|lo_c| + |hi_c|) 2^-20,
// covers all three with a wide margin. The dot product of q with the
// dequantised row is off by at most gamma sum_c |q_c| |deq_c| with gamma =
// (D + 4) 2^-23 (a chain of D fmas, then the slack's own sums); |deq_c| <=
// max(|lo_c|, |hi_c|) + e_c. So
//     q . k <= q . deq + sum_c |q_c| e_c
//              + gamma sum_c |q_c| (max(|lo_c|, |hi_c|) + e_c).
// The certificate adds kBoundMargin on top for the rounding of the scale
// and of the partials.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_SKETCH_H
#define CONDENSATE_CODEGEN_COMMON_SKETCH_H

#include "Emitter.h"
#include "TargetInfo.h"

#include "condensate/ABI/AttentionABI.h"

namespace mlir::condensate {

using ::condensate::abi::kSketchMagnitudeSlack;
using ::condensate::abi::kSketchStepSlack;

/// One channel's code (i32 in [0, 2^bits - 1]) of the stored key `k` (f32)
/// against the page box [lo, hi] (f32 scalars); 0 when hi == lo or for
/// non-finite input.
Value sketchCode(Emitter &e, Value k, Value lo, Value hi, int64_t bits);

/// The per-channel terms of one page's sketch, chunk by chunk.
struct SketchRow {
  SmallVector<Value> lo, step, err, mag;
};
/// The terms from the page's key box rows.
SketchRow sketchRow(Emitter &e, ArrayRef<Value> lo, ArrayRef<Value> hi,
                    int64_t bits);
/// sum_c |q_c| e_c + gamma sum_c |q_c| mag_c for the row of `headDim`
/// channels, summed over `lanes` lanes like rowDot.
Value sketchSlack(Emitter &e, const TargetInfo &target, ArrayRef<Value> q,
                  const SketchRow &row, int64_t headDim, int64_t lanes);
/// The dequantised keys lo + code * step of one token, from the chunks of
/// its word row as loaded (f32 bit patterns) and the bit offset `shift`
/// (i32) of its codes in each word.
SmallVector<Value> sketchKeys(Emitter &e, const SketchRow &row,
                              ArrayRef<Value> words, Value shift,
                              int64_t bits);
/// The word row (index) and bit offset (i32) of token `off` of a page.
std::pair<Value, Value> sketchSlot(Emitter &e, Value off, int64_t bits);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_SKETCH_H
