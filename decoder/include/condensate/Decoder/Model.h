//===- Model.h - Architectures described as data, float32 weights from GGUF
//===//
//
// A GGUF architecture (general.architecture) is described once, as data: an
// Architecture says which tensors its blocks hold, which are optional, how
// RoPE pairs are formed and which gated activation its MLP uses. One loader
// reads any described architecture into a ModelConfig (hyperparameters from
// `{arch}.*` metadata plus the resolved facts the layer recipe reads) and
// ModelWeights (row-major [out, in] matrices: a GGUF tensor with ne = [in,
// out] is exactly that). Matrices stay in the file's quantised blocks
// (WeightStorage::Quantized: a model takes about its file size in memory;
// a decode step's products read the blocks in place, model::dotRows, and
// prefill's dequantise a tile at a time for sgemm) or are dequantised once
// to float32. By default (Auto) a model stays quantised where this CPU
// has an in-place kernel for every matrix's type (model::dotRowsFast),
// else it is dequantised when its float32 copy takes at most half of the
// machine's memory. Projections that read the same input are
// stored fused so one matrix product serves them: q, k and v as one
// [(Hq + 2 Hkv) * D, hidden] matrix, gate and up as one [2 * ffn, hidden].
// Norms and biases are float32 always.
//
// Adding an architecture is adding a row to the table in Model.cpp; one
// whose blocks differ says so in the row's fields (Gemma 3: extra norms,
// QK-norm, GeGLU, embedding scale, local sliding-window layers with their
// own RoPE base), and the recipe reads the resolved ModelConfig, never a
// name.
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
  /// f = gelu, tanh approximation: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715
  /// g^3))) (Gemma 3's gelu_pytorch_tanh)
  GeGLU,
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
  /// blk.N.attn_{q,k}_norm: RMSNorm of every q and k head (weights
  /// [head_dim]) before RoPE.
  Presence qkNorm = Presence::Absent;
  /// blk.N.post_attention_norm and blk.N.post_ffw_norm: RMSNorm of the
  /// attention and MLP outputs before each joins the residual.
  Presence postNorms = Presence::Absent;
  /// The embedding rows are multiplied by sqrt(embedding_length).
  bool scaleEmbedding = false;
  /// Local (sliding-window) layers: every layer l with (l + 1) %
  /// slidingWindowPattern != 0 attends only to the last
  /// `{arch}.attention.sliding_window` positions, with RoPE base
  /// localRopeTheta and no RoPE scaling; 0: every layer is global. Neither
  /// is in Gemma 3's GGUF metadata (llama.cpp fixes them per architecture).
  int64_t slidingWindowPattern = 0;
  double localRopeTheta = 0.0;
  /// A model of this many layers scales q.k by 1/sqrt(hidden / heads)
  /// instead of 1/sqrt(head_dim) (Gemma 3 27B's query_pre_attn_scalar, not
  /// in its GGUF; llama.cpp keys it on the depth); 0: never.
  int64_t widthScaleLayers = 0;
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
  /// rope_freqs.weight: per-pair divisors of the RoPE frequencies (how
  /// llama.cpp stores Llama 3.1's rope scaling).
  bool ropeFactors = false;
  bool qkNorm = false;        ///< per-head q/k RMSNorm before RoPE
  bool postNorms = false;     ///< RMSNorm of attention and MLP outputs
  /// Factor of the embedding rows (sqrt(hidden) for Gemma 3, else 1).
  float embedScale = 1.0f;
  /// Softmax scale of the logits q.k; 0 means 1/sqrt(headDim).
  float attentionScale = 0.0f;
  /// Positions a local layer attends to (the current one included); 0 when
  /// every layer is global.
  int64_t slidingWindow = 0;
  int64_t slidingWindowPattern = 0; ///< see Architecture
  double localRopeTheta = 10000.0;  ///< RoPE base of local layers

  /// Whether layer `l` is a local (sliding-window) layer.
  bool localLayer(int64_t l) const {
    return slidingWindow > 0 && slidingWindowPattern > 0 &&
           (l + 1) % slidingWindowPattern != 0;
  }
  /// Per layer, the positions the model's own attention sees: slidingWindow
  /// on a local layer, 0 (the whole context) on a global one.
  std::vector<int64_t> attentionSpans() const {
    std::vector<int64_t> spans(size_t(numLayers), 0);
    for (int64_t l = 0; l < numLayers; ++l)
      if (localLayer(l))
        spans[size_t(l)] = slidingWindow;
    return spans;
  }
  /// RoPE base and linear position divisor of layer `l`.
  double ropeThetaFor(int64_t l) const {
    return localLayer(l) ? localRopeTheta : ropeTheta;
  }
  double ropeScaleFor(int64_t l) const {
    return localLayer(l) ? 1.0 : ropeLinearScale;
  }

  int64_t qDim() const { return qHeads * headDim; }
  int64_t kvDim() const { return kvHeads * headDim; }
  int64_t qkvDim() const { return qDim() + 2 * kvDim(); }
  /// One line, e.g. "llama: 30 layers, hidden 576, 9/3 heads x 64, ...".
  std::string describe() const;
};

/// How ModelWeights holds its matrices.
enum class WeightStorage {
  Auto,      ///< Quantized if every matrix's type is dotRowsFast, else
             ///< Float32 if that copy fits in half the memory
  Quantized, ///< the file's blocks (float32 tensors stay float32)
  Float32,   ///< dequantised once at load
};

/// A matrix [rows, cols], row-major, as held in memory: float32, or the
/// GGUF blocks of the tensors it was read from (a fused matrix keeps each
/// tensor's rows in that tensor's own type).
class WeightMatrix {
public:
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  /// Whether any rows are held as quantised blocks (then f32() is null).
  bool quantized() const { return !segments_.empty(); }
  /// The float32 values [rows, cols], or null when quantised.
  const float *f32() const { return quantized() ? nullptr : f32_.data(); }
  /// Rows [first, first + count) as float32 into out[count, cols]
  /// (in range: the caller's bound).
  void rowsF32(int64_t first, int64_t count, float *out) const;
  /// out[i] = row first + i . x for i < count (in range: the caller's
  /// bound), the quantised rows dotted block by block without decoding
  /// them (model::dotRows); xSums is model::blockSums(x, cols()), used
  /// only when quantized().
  void dotRows(int64_t first, int64_t count, const float *x, const float *xSums,
               float *out) const;
  /// The whole matrix as float32.
  std::vector<float> toF32() const;
  /// The whole matrix rounded to bfloat16 (floatToBF16: nearest, ties to
  /// even), as the GPU holds it with WeightType::BF16; quantised rows are
  /// decoded a tile at a time, never as a whole float32 copy.
  std::vector<uint16_t> toBF16() const;
  /// Bytes held.
  int64_t bytes() const;

private:
  friend class ModelWeights;
  struct Segment {
    uint32_t type = 0; ///< ggml type code
    int64_t firstRow = 0, rows = 0, rowBytes = 0;
    size_t offset = 0; ///< of the first row in `blocks_`
  };
  int64_t rows_ = 0, cols_ = 0;
  std::vector<float> f32_;
  std::vector<uint8_t> blocks_;
  std::vector<Segment> segments_;
};

/// One transformer block's weights, row-major [out, in].
struct LayerWeights {
  std::vector<float> attnNorm; ///< [hidden]
  WeightMatrix wqkv;           ///< [qkvDim, hidden]: q rows, k rows, v rows
  std::vector<float> bqkv;     ///< [qkvDim], empty without attention biases
  WeightMatrix wo;             ///< [hidden, qDim]
  std::vector<float> bo;       ///< [hidden], empty without an output bias
  std::vector<float> ffnNorm;  ///< [hidden]
  WeightMatrix wGateUp;        ///< [2 * ffn, hidden]: gate rows, up rows
  WeightMatrix wDown;          ///< [hidden, ffn]
  std::vector<float> qNorm, kNorm; ///< [headDim] each, empty without QK-norm
  /// [hidden] each, empty without post-norms.
  std::vector<float> postAttnNorm, postFfnNorm;
};

/// A model's architecture and weights. Immutable once loaded; share it
/// between decoders through a shared_ptr.
class ModelWeights {
public:
  /// Loads from an open GGUF file. Errors are one line and name the file
  /// and the offending key or tensor. Every weight is checked finite (each
  /// matrix is decoded once, a tile at a time, to check it).
  static Result<std::shared_ptr<const ModelWeights>>
  load(const model::GGUFFile &file,
       WeightStorage storage = WeightStorage::Auto);
  /// Opens `path` and loads it.
  static Result<std::shared_ptr<const ModelWeights>>
  load(const std::string &path, WeightStorage storage = WeightStorage::Auto);
  /// Reads only the architecture (no tensor data is decoded).
  static Result<ModelConfig> readConfig(const model::GGUFFile &file);
  /// Random float32 weights of a named real architecture, for speed at a
  /// scale whose real weights cannot travel (DESIGN.md section 8): the
  /// shapes, head counts, RoPE base, biases and tied output of `name`
  /// (dummyArchitectures() lists them), values drawn uniformly from
  /// +-1/sqrt(fan-in) by a counter-based generator seeded with `seed` (the
  /// same weights on every machine), norms 1. Its text is meaningless; its
  /// step time is the model's.
  static Result<std::shared_ptr<const ModelWeights>>
  dummy(const std::string &name, uint64_t seed = 1);
  /// "llama-3.2-1b, llama-3-8b, qwen2.5-7b, qwen2.5-0.5b, tiny-llama".
  static std::string dummyArchitectures();

  const ModelConfig &config() const { return config_; }
  /// How the matrices are held (never Auto).
  WeightStorage storage() const { return storage_; }
  const LayerWeights &layer(int64_t l) const { return layers_[size_t(l)]; }
  /// [vocab, hidden]
  const WeightMatrix &tokenEmbedding() const { return tokenEmbd_; }
  /// [vocab, hidden]: output.weight, or token_embd when tied.
  const WeightMatrix &outputWeights() const {
    return config_.tiedOutput ? tokenEmbd_ : output_;
  }
  const float *outputNorm() const { return outputNorm_.data(); }
  /// The RoPE frequencies of a local or a global layer, [ropeDim / 2]: pair
  /// i of a head at position p turns by p * f_i, f_i = base^(-2i / ropeDim)
  /// / factor_i / linear scale, with the layer's base and scaling
  /// (ModelConfig::ropeThetaFor, ropeScaleFor) and the file's rope_freqs
  /// factors (1 without them). Every backend rotates by these.
  std::vector<double> ropeFrequencies(bool local) const;
  /// Bytes of weights held.
  int64_t bytes() const;

private:
  /// `out` = the rows of `tensors` (name, rows) in order, each [cols, rows]
  /// in GGUF order, held as `storage` says; every value checked finite.
  static Status
  loadMatrix(const model::GGUFFile &file,
             const std::vector<std::pair<std::string, int64_t>> &tensors,
             int64_t cols, WeightStorage storage, WeightMatrix &out);

  ModelConfig config_;
  WeightStorage storage_ = WeightStorage::Float32;
  WeightMatrix tokenEmbd_; ///< [vocab, hidden]
  WeightMatrix output_;    ///< [vocab, hidden], empty when tied
  std::vector<float> outputNorm_; ///< [hidden]
  std::vector<float> ropeFactors_; ///< [ropeDim / 2], empty without them
  std::vector<LayerWeights> layers_;
};

} // namespace condensate::decoder

#endif // CONDENSATE_DECODER_MODEL_H
