//===- Sketch.h - key sketches: quantisation, per-token bounds --*- C++ -*-===//
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
// covers all three with a wide margin (kSketchStepSlack adds 2^-10 more
// for tensor cores, below).
//
// The kernels evaluate q . (lo + code * step) in one of two forms:
//  - dequantised: sum_c q_c * fma(code_c, step_c, lo_c), a chain of D
//    products (the CPU, the GPU's certificate);
//  - biased (the GPU's score_sketch): with a_c = fl(q_c step_c) 2^bits (or
//    fl(q_c (step_c 2^bits)), the same number barring underflow) and
//    v_c = 1 + code_c 2^-bits (the code in the top mantissa bits of 1.0,
//    made by two bit operations, exact),
//        sum_c (q_c lo_c - a_c) + sum_c a_c v_c,
//    3D terms of size at most |q_c| (|lo_c| + 3 * 2^bits step_c (1 + u)),
//    plus u sum_c |q_c| L step_c from rounding a_c (its 2^bits parts cancel
//    exactly: both sums use the same a_c). A kernel may fold a channel's
//    q_c lo_c - a_c and its slack term |q_c| (e_c + gamma m_c) into the
//    sum by fma: the same terms with fewer roundings.
// On tensor cores (the GPU's score_sketch where sketchOnTensorCores holds,
// bits <= 4, Score.cpp) the biased form's products are exact: a_c is split into
// three bf16 by clearing the low 16 bits of its f32 encoding twice (hi, then
// mid of the rest; lo, the rest, has at most 8 significant bits; all three
// truncate toward zero, so |hi| + |mid| + |lo| = |a_c|), and v_c is a bf16
// (bits <= 7). Each k-step of 16 channels sums its three products per channel
// in three mma.sync starting from zero. We take an mma.sync's f32 result to be
// within (16 + 2) 2^-22 (|c| + sum |products|) of c + sum products (products
// exact, aligned to the largest and truncated keeping at least 23 bits: Fasi,
// Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores",
// PeerJ Computer Science 2021; twice their bound), so a k-step's sum is off by
// at most 3 * 72 u sum_c |a_c| v_c
// <= 432 u 2^bits (1 + u) sum_c |q_c| step_c: under 2^-11 |q_c| step_c a
// channel for bits <= 4, which kSketchStepSlack's 2^-9 covers beside the
// 2^-10 above. The k-steps' sums are then terms of the f32 sum below.
// A sum of n terms, in any order, is off by at most gamma_n sum |terms|,
// gamma_n <= (n + 1) u (u = 2^-24). With
//     m_c = |lo_c| + 4 * 2^bits step_c,
// which bounds both forms' terms (|deq_c| <= max(|lo_c|, |hi_c|) + e_c <=
// m_c), and gamma = (4D + 8) u (3D for the terms, the rest for the slack's
// own float32 sums and the a_c rounding),
//     q . k <= q . deq + sum_c |q_c| e_c + gamma sum_c |q_c| m_c
// whichever form computed q . deq. The certificate adds kBoundMargin on
// top for the rounding of the scale and of the partials.
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

/// The per-channel terms of one page's sketch, chunk by chunk: lo_c,
/// step_c and the slack weight e_c + gamma m_c.
struct SketchRow {
  SmallVector<Value> lo, step, slack;
};
/// The terms from the page's key box rows, for rows of `headDim` channels.
SketchRow sketchRow(Emitter &e, ArrayRef<Value> lo, ArrayRef<Value> hi,
                    int64_t bits, int64_t headDim);
/// sum_c |q_c| (e_c + gamma m_c) over this lane's chunks, summed over
/// `lanes` lanes like rowDot.
Value sketchSlack(Emitter &e, const TargetInfo &target, ArrayRef<Value> q,
                  const SketchRow &row, int64_t lanes);
/// The dequantised keys lo + code * step of one token, from the chunks of
/// its word row as loaded (f32 bit patterns) and the bit offset `shift`
/// (i32) of its codes in each word.
SmallVector<Value> sketchKeys(Emitter &e, const SketchRow &row,
                              ArrayRef<Value> words, Value shift,
                              int64_t bits);
/// The biased form's v = 1 + code * 2^-bits (f32, exact) of the code at bit
/// `shift` (a constant) of each i32 word of `words` (a scalar or vector).
Value sketchBiasedCode(Emitter &e, Value words, int64_t shift, int64_t bits);
/// The word row (index) and bit offset (i32) of token `off` of a page.
std::pair<Value, Value> sketchSlot(Emitter &e, Value off, int64_t bits);

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_SKETCH_H
