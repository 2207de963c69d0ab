//===- Model.h - Architectures described as data, float32 weights from GGUF
//===//
//
// A GGUF architecture (general.architecture) is described once, as data: an
// Architecture says which tensors its blocks hold, which are optional, how
// RoPE pairs are formed and which gated activation its MLP uses. One loader
// reads any described architecture into a ModelConfig (hyperparameters from
// `{arch}.*` metadata plus the resolved facts the layer recipe reads) and
// ModelWeights (every weight dequantised once to float32, row-major
// [out, in]: a GGUF tensor with ne = [in, out] is exactly that).
// Projections that read the same input are stored fused so one matrix
// product serves them: q, k and v as one [(Hq + 2 Hkv) * D, hidden] matrix,
// gate and up as one [2 * ffn, hidden].
//
// Adding an architecture is adding a row to the table in Model.cpp; one
// whose blocks differ (Gemma 3: extra norms, QK-norm, GeGLU, embedding
// scale, local/global layers) adds the fields that say so here and the
// steps that read them to the recipe, which never looks at names.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DECODER_MODEL_H
#define CONDENSATE_DECODER_MODEL_H

#include "condensate/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace condensate::model {
class GGUFFile;
} // namespace condensate::model

namespace condensate::decoder {

/// How a head's rotary pairs are formed. llama.cpp's GGUF conversion
/// permutes Llama's q/k rows so adjacent pairs (x[2i], x[2i+1]) are rotated
/// ("NORM"); Qwen2 keeps Hugging Face's halves (x[i], x[i + n/2], "NEOX").
enum class RopeMode { Adjacent, Halves };

/// The MLP's gated activation: act = f(gate) * up.
enum class Activation {
  SwiGLU, ///< f = silu (Llama, Qwen2)
};

/// Whether an architecture's blocks hold a tensor.
enum class Presence { Absent, Optional, Required };

/// One GGUF architecture, as data. Every block has attn_norm, attn_q/k/v,
/// attn_output, ffn_norm, ffn_gate/up/down; the fields say what else.
struct Architecture {
  const char *name; ///< general.architecture
  RopeMode rope;    ///< llama.cpp's llama_model_rope_type
  Activation activation;
  Presence qkvBias;    ///< blk.N.attn_{q,k,v}.bias
  Presence outputBias; ///< blk.N.attn_output.bias
  /// output.weight; when absent the logits use token_embd (tied).
  Presence outputWeight;
};

/// The description of `name`, or null if it is not supported.
const Architecture *findArchitecture(const std::string &name);
/// "llama, mistral, qwen2": the supported names, for messages.
std::string supportedArchitectures();

/// Hyperparameters from `{arch}.*` GGUF metadata, and the resolved facts of
/// the architecture description and the file that the recipe reads.
struct ModelConfig {
  std::string architecture;  ///< general.architecture
  int64_t numLayers = 0;     ///< block_count
  int64_t hidden = 0;        ///< embedding_length
  int64_t ffn = 0;           ///< feed_forward_length
  int64_t qHeads = 0;        ///< attention.head_count
  int64_t kvHeads = 0;       ///< attention.head_count_kv (default qHeads)
  int64_t headDim = 0;       ///< attention.key_length or hidden / qHeads
  int64_t vocab = 0;         ///< rows of token_embd
  int64_t contextLength = 0; ///< context_length (0 if absent)
  int64_t ropeDim = 0;       ///< rope.dimension_count (default headDim)
  double ropeTheta = 10000.0;
  /// Positions are divided by this (rope.scaling.type = linear).
  double ropeLinearScale = 1.0;
  RopeMode ropeMode = RopeMode::Adjacent;
  Activation activation = Activation::SwiGLU;
  double rmsEps = 1e-5;
  bool attentionBias = false; ///< q/k/v biases present
  bool outputBias = false;    ///< attn_output biases present
  bool tiedOutput = false;    ///< logits use token_embd (no output.weight)

  int64_t qDim() const { return qHeads * headDim; }
  int64_t kvDim() const { return kvHeads * headDim; }
  int64_t qkvDim() const { return qDim() + 2 * kvDim(); }
  /// One line, e.g. "llama: 30 layers, hidden 576, 9/3 heads x 64, ...".
  std::string describe() const;
};

/// One transformer block's weights, float32 row-major [out, in].
struct LayerWeights {
  std::vector<float> attnNorm; ///< [hidden]
  std::vector<float> wqkv;     ///< [qkvDim, hidden]: q rows, k rows, v rows
  std::vector<float> bqkv;     ///< [qkvDim], empty without attention biases
  std::vector<float> wo;       ///< [hidden, qDim]
  std::vector<float> bo;       ///< [hidden], empty without an output bias
  std::vector<float> ffnNorm;  ///< [hidden]
  std::vector<float> wGateUp;  ///< [2 * ffn, hidden]: gate rows, up rows
  std::vector<float> wDown;    ///< [hidden, ffn]
};

/// A model's architecture and float32 weights. Immutable once loaded; share
/// it between decoders through a shared_ptr.
class ModelWeights {
public:
  /// Loads from an open GGUF file. Errors are one line and name the file
  /// and the offending key or tensor.
  static Result<std::shared_ptr<const ModelWeights>>
  load(const model::GGUFFile &file);
  /// Opens `path` and loads it.
  static Result<std::shared_ptr<const ModelWeights>>
  load(const std::string &path);
  /// Reads only the architecture (no tensor data is decoded).
  static Result<ModelConfig> readConfig(const model::GGUFFile &file);

  const ModelConfig &config() const { return config_; }
  const LayerWeights &layer(int64_t l) const { return layers_[size_t(l)]; }
  const float *tokenEmbedding() const { return tokenEmbd_.data(); }
  /// [vocab, hidden]: output.weight, or token_embd when tied.
  const float *outputWeights() const {
    return config_.tiedOutput ? tokenEmbd_.data() : output_.data();
  }
  const float *outputNorm() const { return outputNorm_.data(); }
  /// Bytes of float32 weights held.
  int64_t bytes() const;

private:
  ModelConfig config_;
  std::vector<float> tokenEmbd_;  ///< [vocab, hidden]
  std::vector<float> output_;     ///< [vocab, hidden], empty when tied
  std::vector<float> outputNorm_; ///< [hidden]
  std::vector<LayerWeights> layers_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_MODEL_H
