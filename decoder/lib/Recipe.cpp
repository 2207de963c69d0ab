//===- Recipe.cpp - The layer recipe, written once for every backend ------===//
//
// One forward pass of a pre-norm decoder block stack: (scaled) embedding;
// per block RMSNorm, fused q/k/v projection, per-head q/k RMSNorm where the
// model has it, RoPE (the layer's base), KV append, attention (the model's
// own causal attention for prefill rows, the program's policy for decode
// rows), output projection into the residual (through a post-norm where the
// model has one), RMSNorm, gated MLP into the residual (likewise); then the
// final norm and the logits. Prefill chunks and decode steps both run through here; what
// an architecture holds comes from its ModelConfig, never from its name.
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

#include <chrono>

namespace condensate::decoder {

namespace {

using Clock = std::chrono::steady_clock;

/// Adds the time since the last lap to a slot (a few tens of nanoseconds
/// per lap, against milliseconds of BLAS work per step). Off for
/// asynchronous backends, whose ops return before they run.
class Lap {
public:
  explicit Lap(bool on) : on_(on), last_(Clock::now()) {}
  void to(double &slot) {
    if (!on_)
      return;
    Clock::time_point now = Clock::now();
    slot += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

private:
  bool on_;
  Clock::time_point last_;
};

} // namespace

Status forward(Backend &be, const ModelConfig &c, const ForwardBatch &batch,
               Rows logitRows, float *logits, StepProfile &prof) {
  CONDENSATE_RETURN_IF_ERROR(be.begin(batch));
  const bool decode = batch.kind == ForwardKind::Decode;
  const int64_t logitCount = logitRows.count < 0 ? batch.rows : logitRows.count;
  Lap lap(be.synchronous());
  auto body = [&]() -> Status {
    const ModelParams &P = be.params();
    CONDENSATE_RETURN_IF_ERROR(be.embed(c.embedScale));
    for (int64_t l = 0; l < c.numLayers; ++l) {
      const LayerParams &L = P.layers[size_t(l)];
      CONDENSATE_RETURN_IF_ERROR(be.rmsNorm(Buf::X, L.attnNorm, Buf::H));
      lap.to(prof.norms);
      CONDENSATE_RETURN_IF_ERROR(
          be.linear(Buf::H, L.wqkv, L.bqkv, Buf::QKV, false));
      lap.to(prof.qkv);
      if (c.qkNorm) {
        // The heads are normalised between the split and the rotation.
        CONDENSATE_RETURN_IF_ERROR(be.splitQKV());
        CONDENSATE_RETURN_IF_ERROR(be.headNorm(Buf::Q, L.qNorm));
        CONDENSATE_RETURN_IF_ERROR(be.headNorm(Buf::K, L.kNorm));
        CONDENSATE_RETURN_IF_ERROR(be.rope(Buf::Q, l));
        CONDENSATE_RETURN_IF_ERROR(be.rope(Buf::K, l));
      } else {
        CONDENSATE_RETURN_IF_ERROR(be.splitRope(l));
      }
      if (decode)
        CONDENSATE_RETURN_IF_ERROR(be.keepQueries(l));
      lap.to(prof.norms);
      CONDENSATE_RETURN_IF_ERROR(be.append(l));
      lap.to(prof.append);
      CONDENSATE_RETURN_IF_ERROR(decode ? be.attend(l) : be.prefillAttend(l));
      lap.to(prof.attention);
      // With post-norms a block's output is normalised before it joins the
      // residual; H is free by then and holds it.
      if (c.postNorms) {
        CONDENSATE_RETURN_IF_ERROR(
            be.linear(Buf::Attn, L.wo, L.bo, Buf::H, false));
        lap.to(prof.output);
        CONDENSATE_RETURN_IF_ERROR(
            be.rmsNorm(Buf::H, L.postAttnNorm, Buf::X, {}, true));
        lap.to(prof.norms);
      } else {
        CONDENSATE_RETURN_IF_ERROR(
            be.linear(Buf::Attn, L.wo, L.bo, Buf::X, true));
        lap.to(prof.output);
      }
      CONDENSATE_RETURN_IF_ERROR(be.rmsNorm(Buf::X, L.ffnNorm, Buf::H));
      lap.to(prof.norms);
      CONDENSATE_RETURN_IF_ERROR(
          be.linear(Buf::H, L.wGateUp, Param(), Buf::GU, false));
      lap.to(prof.mlp);
      CONDENSATE_RETURN_IF_ERROR(be.activation(c.activation));
      lap.to(prof.norms);
      if (c.postNorms) {
        CONDENSATE_RETURN_IF_ERROR(
            be.linear(Buf::Act, L.wDown, Param(), Buf::H, false));
        lap.to(prof.mlp);
        CONDENSATE_RETURN_IF_ERROR(
            be.rmsNorm(Buf::H, L.postFfnNorm, Buf::X, {}, true));
        lap.to(prof.norms);
      } else {
        CONDENSATE_RETURN_IF_ERROR(
            be.linear(Buf::Act, L.wDown, Param(), Buf::X, true));
        lap.to(prof.mlp);
      }
    }
    if (logitCount > 0) {
      const Rows rows{logitRows.first, logitCount};
      CONDENSATE_RETURN_IF_ERROR(
          be.rmsNorm(Buf::X, P.outputNorm, Buf::H, rows));
      CONDENSATE_RETURN_IF_ERROR(be.linear(
          Buf::H, P.output, Param(), Buf::Logits, false, Rows{0, logitCount}));
      lap.to(prof.logits);
    }
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(be.run(body));
  return be.finish(logits, logitCount);
}

} // namespace condensate::decoder
