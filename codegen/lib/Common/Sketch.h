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
// (< 2^-15 step_c at codes <= 255) and the dequantised value by ulps of
// max(|lo|, |hi|); the per-channel error used below,
//     e_c = step_c (1/2 + 2^-9) + (|lo_c| + |hi_c|) 2^-20
// (kSketchStepSlack, kSketchMagnitudeSlack), covers the first two (under
// 2^-13.4 step_c) and the tensor cores' split and accumulation (under
// (2^-10 + 2^-10.8) step_c, below) with 17% to spare, and the third by the
// magnitude term.
//
// The kernels evaluate q . (lo + code * step) in one of three forms:
//  - dequantised: sum_c q_c * fma(code_c, step_c, lo_c), a chain of D
//    products (the CPU's 8-bit sketches, the GPU's certificate);
//  - split: sum_c q_c lo_c + sum_c fl(q_c step_c) code_c (the CPU's score
//    for bits <= 4, a lane a token, ToLoops/Score.cpp), 2D terms of size
//    at most |q_c| m_c, the code converted exactly, plus u sum_c |q_c| L
//    step_c from rounding q_c step_c, as in the biased form;
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
// bits <= 4, Score.cpp) the biased form's products are exact: v_c is a bf16
// (bits <= 7) and a_c is replaced by a'_c = hi_c + mid_c, two bf16: hi_c the
// top 16 bits of a_c's f32 encoding (a_c truncated to 8 significant bits, so
// that r_c = a_c - hi_c is exact in f32 and |r_c| < 2^-7 |a_c|) and mid_c =
// r_c rounded to bf16, |r_c - mid_c| <= 2^-8 |r_c|. The constant keeps the
// f32 a_c, so the sum moves by sum_c |a_c - a'_c| v_c < 2^-14 sum_c |a_c|
// <= 2^(bits-14) (1 + u) sum_c |q_c| step_c (v_c < 2). A tile chains the
// products of kSketchMmaStepsChained = 2 k-steps (32 channels) in the addend
// of M = 4 mma.sync (mid before hi), starting from zero, and the chain's
// result is a term of the float32 sum below. We take an mma.sync's f32
// result to be within (16 + 2) 2^-22 (|c| + sum |products|) = 72 u (...) of
// c + sum products (products exact, aligned to the largest and truncated
// keeping at least 23 bits: Fasi, Higham, Mikaitis and Pranesh, "Numerical
// behavior of NVIDIA tensor cores", PeerJ Computer Science 2021; twice their
// bound). An addend is at most the earlier products' sum of magnitudes
// (times (1 + 72 u) a step), so the chain is off by at most
// 72 u M (1 + 72 u)^M sum_c |a'_c| v_c
// <= 576 u 2^bits (1 + 2^-14) sum_c |q_c| step_c. For bits <= 4 the two
// together stay under (2^-10 + 2^-10.8) |q_c| step_c a channel, which
// kSketchStepSlack's 2^-9 covers beside the float32 quantisation's
// 2^-13.4 above. (A part below bf16's normal range, flushed or not, moves
// its channel by under 2^-125: inside kBoundMargin's absolute term.)
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

/// k-steps (16 channels each) whose tensor-core products are chained in
/// one mma addend before their sum is added in float32 (the bound above).
constexpr int64_t kSketchMmaStepsChained = 2;

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
