//===- Model.cpp - The architecture table and the one GGUF weight loader --===//
//
// The supported architectures as rows of data; the loader reads `{arch}.*`
// metadata into a ModelConfig, checks every tensor the description names
// for presence and shape, and keeps each matrix's blocks (or dequantises
// them to float32) in its (fused) destination.
//
//===----------------------------------------------------------------------===//
#include "condensate/Decoder/Model.h"

#include "condensate/ABI/Limits.h"
#include "condensate/Model/GGUF.h"
#include "condensate/Support/BFloat16.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <tuple>

namespace condensate::decoder {

using model::GGUFFile;
using model::TensorInfo;

namespace {

std::string quoted(const std::string &s) { return "'" + s + "'"; }

/// Every supported architecture. The RoPE form is llama.cpp's
/// llama_model_rope_type (Qwen2 is NEOX, Llama NORM). Biases are optional
/// everywhere because the files decide: Qwen2 ships q/k/v biases, some
/// Llama fine-tunes do too.
constexpr Architecture kArchitectures[] = {
    {"llama", RopeMode::Adjacent, Activation::SwiGLU, Presence::Optional,
     Presence::Optional, Presence::Optional},
    {"mistral", RopeMode::Adjacent, Activation::SwiGLU, Presence::Optional,
     Presence::Optional, Presence::Optional},
    {"qwen2", RopeMode::Halves, Activation::SwiGLU, Presence::Optional,
     Presence::Optional, Presence::Optional},
    // llama.cpp's LLM_ARCH_GEMMA3: NEOX rope, local layers in runs of five
    // between global ones (set_swa_pattern(6)) with base 10000
    // (rope_freq_base_train_swa), the 27B's 62 layers scaled by width.
    // Its GGUF norm weights already hold Gemma's (1 + w).
    {"gemma3", RopeMode::Halves, Activation::GeGLU, Presence::Absent,
     Presence::Absent, Presence::Optional, Presence::Required,
     Presence::Required, true, 6, 10000.0, 62},
};

/// Whether file `f` holds the tensor an architecture gives `presence`,
/// judged by `probe` (its layer-0 instance for per-block tensors); a
/// required one must be there. Later layers are checked as they load.
Result<bool> holds(const GGUFFile &f, Presence presence,
                   const std::string &probe) {
  const bool found = f.findTensor(probe) != nullptr;
  if (presence == Presence::Required && !found)
    return Status::error(f.name() + ": missing tensor " + quoted(probe));
  return presence != Presence::Absent && found;
}

/// An optional non-negative integer key; `def` when absent.
Result<int64_t> optionalInt(const GGUFFile &f, const std::string &key,
                            int64_t def) {
  if (!f.has(key))
    return def;
  Result<int64_t> v = f.getI64(key);
  if (!v)
    return v.status();
  if (*v < 0)
    return Status::error(f.name() + ": key " + quoted(key) + " is " +
                         std::to_string(*v) + ", expected >= 0");
  return *v;
}

Result<int64_t> requiredPositive(const GGUFFile &f, const std::string &key) {
  Result<int64_t> v = f.getI64(key);
  if (!v)
    return v.status();
  if (*v <= 0)
    return Status::error(f.name() + ": key " + quoted(key) + " is " +
                         std::to_string(*v) + ", expected > 0");
  return *v;
}

Result<double> optionalFloat(const GGUFFile &f, const std::string &key,
                             double def) {
  if (!f.has(key))
    return def;
  Result<double> v = f.getF64(key);
  if (!v)
    return v.status();
  return *v;
}

std::string shapeText(int64_t ne0, int64_t ne1) {
  return ne1 ? "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + "]"
             : "[" + std::to_string(ne0) + "]";
}

/// Finds tensor `name` and checks it is a vector [ne0] (ne1 == 0) or a
/// matrix [ne0, ne1] in GGUF order.
Result<const TensorInfo *> expectTensor(const GGUFFile &f,
                                        const std::string &name, int64_t ne0,
                                        int64_t ne1) {
  const TensorInfo *t = f.findTensor(name);
  if (!t)
    return Status::error(f.name() + ": missing tensor " + quoted(name));
  bool ok = t->ne[0] == ne0 && t->ne[2] == 1 && t->ne[3] == 1 &&
            (ne1 ? t->ne[1] == ne1 : t->ne[1] == 1);
  if (!ok)
    return Status::error(f.name() + ": tensor " + quoted(name) +
                         " has shape " + t->shapeString() + ", expected " +
                         shapeText(ne0, ne1));
  return t;
}

/// The first non-finite value of v[0, n), or -1.
int64_t firstNonFinite(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      return i;
  return -1;
}

Status nonFiniteError(const GGUFFile &f, const std::string &name, float v,
                      int64_t at) {
  return Status::error(f.name() + ": tensor " + quoted(name) +
                       " holds a non-finite value (" +
                       (std::isnan(v) ? "NaN" : "inf") + ") at element " +
                       std::to_string(at));
}

/// Dequantises the whole of `t` into `out` (t->numElements floats).
Status decodeInto(const GGUFFile &f, const TensorInfo &t, float *out) {
  return f.dequantizeRows(t, 0, t.numRows(), out);
}

/// Loads tensor `name` of shape [ne0, ne1] into `out[offset...]`.
Status loadTensor(const GGUFFile &f, const std::string &name, int64_t ne0,
                  int64_t ne1, std::vector<float> &out, size_t offset = 0) {
  Result<const TensorInfo *> t = expectTensor(f, name, ne0, ne1);
  if (!t)
    return t.status();
  size_t count = size_t(ne0) * size_t(ne1 ? ne1 : 1);
  size_t need = offset + count;
  if (out.size() < need)
    out.resize(need);
  CONDENSATE_RETURN_IF_ERROR(decodeInto(f, **t, out.data() + offset));
  // A NaN or infinite weight would decode silently into NaN logits.
  const float *v = out.data() + offset;
  if (int64_t at = firstNonFinite(v, int64_t(count)); at >= 0)
    return nonFiniteError(f, name, v[at], at);
  return Status::success();
}

/// Every tensor load() reads, with its expected shape, checked before any
/// buffer is sized: a file whose metadata promises more than its tensors
/// hold fails here, having allocated nothing.
Status checkShapes(const GGUFFile &f, const ModelConfig &c) {
  const int64_t H = c.hidden;
  std::vector<std::tuple<std::string, int64_t, int64_t>> want = {
      {"token_embd.weight", H, c.vocab}, {"output_norm.weight", H, 0}};
  if (!c.tiedOutput)
    want.emplace_back("output.weight", H, c.vocab);
  if (c.ropeFactors)
    want.emplace_back("rope_freqs.weight", c.ropeDim / 2, 0);
  for (int64_t l = 0; l < c.numLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (auto [name, ne0, ne1] :
         {std::tuple<const char *, int64_t, int64_t>{"attn_norm.weight", H, 0},
          {"attn_q.weight", H, c.qDim()},
          {"attn_k.weight", H, c.kvDim()},
          {"attn_v.weight", H, c.kvDim()},
          {"attn_output.weight", c.qDim(), H},
          {"ffn_norm.weight", H, 0},
          {"ffn_gate.weight", H, c.ffn},
          {"ffn_up.weight", H, c.ffn},
          {"ffn_down.weight", c.ffn, H}})
      want.emplace_back(b + name, ne0, ne1);
    if (c.attentionBias) {
      want.emplace_back(b + "attn_q.bias", c.qDim(), 0);
      want.emplace_back(b + "attn_k.bias", c.kvDim(), 0);
      want.emplace_back(b + "attn_v.bias", c.kvDim(), 0);
    }
    if (c.outputBias)
      want.emplace_back(b + "attn_output.bias", H, 0);
    if (c.qkNorm) {
      want.emplace_back(b + "attn_q_norm.weight", c.headDim, 0);
      want.emplace_back(b + "attn_k_norm.weight", c.headDim, 0);
    }
    if (c.postNorms) {
      want.emplace_back(b + "post_attention_norm.weight", H, 0);
      want.emplace_back(b + "post_ffw_norm.weight", H, 0);
    }
  }
  for (const auto &[name, ne0, ne1] : want) {
    Result<const TensorInfo *> t = expectTensor(f, name, ne0, ne1);
    if (!t)
      return t.status();
  }
  return Status::success();
}

} // namespace

const Architecture *findArchitecture(const std::string &name) {
  for (const Architecture &a : kArchitectures)
    if (name == a.name)
      return &a;
  return nullptr;
}

std::string supportedArchitectures() {
  std::string names;
  for (const Architecture &a : kArchitectures)
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

std::string ModelConfig::describe() const {
  std::ostringstream os;
  os << architecture << ": " << numLayers << " layers, hidden " << hidden
     << ", heads " << qHeads << "/" << kvHeads << " x " << headDim << ", ffn "
     << ffn << ", vocab " << vocab << ", rope theta " << ropeTheta
     << (ropeMode == RopeMode::Adjacent ? " (adjacent pairs)" : " (halves)");
  if (ropeLinearScale != 1.0)
    os << " linear x" << ropeLinearScale;
  if (ropeFactors)
    os << " with per-pair factors";
  if (slidingWindow > 0)
    os << "; local layers: window " << slidingWindow << ", rope theta "
       << localRopeTheta << ", all but every " << slidingWindowPattern
       << "th";
  if (attentionBias)
    os << ", qkv bias";
  if (qkNorm)
    os << ", qk-norm";
  if (postNorms)
    os << ", post-norms";
  if (embedScale != 1.0f)
    os << ", embedding x" << embedScale;
  if (activation == Activation::GeGLU)
    os << ", GeGLU";
  if (outputBias)
    os << ", output bias";
  os << (tiedOutput ? ", tied output" : "");
  return os.str();
}

Result<ModelConfig> ModelWeights::readConfig(const GGUFFile &f) {
  ModelConfig c;
  Result<std::string> arch = f.getString("general.architecture");
  if (!arch)
    return arch.status();
  c.architecture = *arch;
  const Architecture *info = findArchitecture(c.architecture);
  if (!info)
    return Status::error(f.name() + ": unsupported architecture " +
                         quoted(c.architecture) + " (supported: " +
                         supportedArchitectures() + ")");
  c.ropeMode = info->rope;
  c.activation = info->activation;
  const std::string p = c.architecture + ".";

#define CONDENSATE_TAKE(var, expr)                                             \
  {                                                                            \
    auto _r = (expr);                                                          \
    if (!_r)                                                                   \
      return _r.status();                                                      \
    var = *_r;                                                                 \
  }
  CONDENSATE_TAKE(c.numLayers, requiredPositive(f, p + "block_count"));
  CONDENSATE_TAKE(c.hidden, requiredPositive(f, p + "embedding_length"));
  CONDENSATE_TAKE(c.ffn, requiredPositive(f, p + "feed_forward_length"));
  CONDENSATE_TAKE(c.qHeads, requiredPositive(f, p + "attention.head_count"));
  CONDENSATE_TAKE(c.kvHeads,
                  optionalInt(f, p + "attention.head_count_kv", c.qHeads));
  CONDENSATE_TAKE(c.contextLength, optionalInt(f, p + "context_length", 0));
  // Bounds before anything is sized from these numbers (a small file must
  // not make the loader allocate gigabytes before its tensors are read).
  auto bound = [&](const char *key, int64_t v, int64_t max) -> Status {
    if (v > max)
      return Status::error(f.name() + ": " + p + key + " = " +
                           std::to_string(v) + " is larger than " +
                           std::to_string(max) + ", the largest accepted");
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(
      bound("block_count", c.numLayers, limits::kMaxLayers));
  CONDENSATE_RETURN_IF_ERROR(
      bound("attention.head_count", c.qHeads, limits::kMaxHeads));
  CONDENSATE_RETURN_IF_ERROR(
      bound("attention.head_count_kv", c.kvHeads, limits::kMaxHeads));
  CONDENSATE_RETURN_IF_ERROR(
      bound("embedding_length", c.hidden, limits::kMaxModelWidth));
  CONDENSATE_RETURN_IF_ERROR(
      bound("feed_forward_length", c.ffn, limits::kMaxModelWidth));
  if (c.hidden % c.qHeads != 0 && !f.has(p + "attention.key_length"))
    return Status::error(f.name() + ": embedding_length " +
                         std::to_string(c.hidden) +
                         " is not a multiple of head_count " +
                         std::to_string(c.qHeads));
  CONDENSATE_TAKE(c.headDim, optionalInt(f, p + "attention.key_length",
                                         c.hidden / c.qHeads));
  if (c.headDim > limits::kMaxHeadDim)
    return Status::error(f.name() + ": head dimension " +
                         std::to_string(c.headDim) + " is larger than " +
                         std::to_string(limits::kMaxHeadDim));
  int64_t valueLength = 0;
  CONDENSATE_TAKE(valueLength,
                  optionalInt(f, p + "attention.value_length", c.headDim));
  CONDENSATE_TAKE(c.ropeDim,
                  optionalInt(f, p + "rope.dimension_count", c.headDim));
  CONDENSATE_TAKE(c.ropeTheta, optionalFloat(f, p + "rope.freq_base", 10000.0));
  CONDENSATE_TAKE(c.rmsEps, optionalFloat(f, p + "attention.layer_norm_rms_epsilon",
                                          1e-5));
  if (info->slidingWindowPattern > 0) {
    CONDENSATE_TAKE(c.slidingWindow,
                    optionalInt(f, p + "attention.sliding_window", 0));
    c.slidingWindowPattern = info->slidingWindowPattern;
    c.localRopeTheta = info->localRopeTheta;
    if (c.slidingWindow > limits::kMaxPolicyTokens)
      return Status::error(f.name() + ": " + p + "attention.sliding_window = " +
                           std::to_string(c.slidingWindow) +
                           " is larger than " +
                           std::to_string(limits::kMaxPolicyTokens) +
                           ", the largest window accepted");
  }
#undef CONDENSATE_TAKE

  if (c.kvHeads <= 0 || c.qHeads % c.kvHeads != 0)
    return Status::error(f.name() + ": head_count " +
                         std::to_string(c.qHeads) +
                         " is not a multiple of head_count_kv " +
                         std::to_string(c.kvHeads));
  if (valueLength != c.headDim)
    return Status::error(f.name() + ": attention.value_length " +
                         std::to_string(valueLength) +
                         " differs from key_length " +
                         std::to_string(c.headDim) + " (unsupported)");
  if (c.headDim <= 0 || c.ropeDim <= 0 || c.ropeDim > c.headDim ||
      c.ropeDim % 2 != 0)
    return Status::error(f.name() + ": rope.dimension_count " +
                         std::to_string(c.ropeDim) +
                         " must be even and in (0, head_dim = " +
                         std::to_string(c.headDim) + "]");
  if (!(c.ropeTheta > 0.0) || !(c.rmsEps > 0.0))
    return Status::error(f.name() + ": rope.freq_base and "
                                    "layer_norm_rms_epsilon must be > 0");

  if (f.has(p + "rope.scaling.type")) {
    Result<std::string> type = f.getString(p + "rope.scaling.type");
    if (!type)
      return type.status();
    if (*type == "linear") {
      Result<double> factor = f.getF64(p + "rope.scaling.factor");
      if (!factor)
        return factor.status();
      if (!(*factor > 0.0))
        return Status::error(f.name() + ": rope.scaling.factor must be > 0");
      c.ropeLinearScale = *factor;
    } else if (*type != "none") {
      return Status::error(f.name() + ": rope.scaling.type " + quoted(*type) +
                           " is not supported (none, linear)");
    }
  } else if (f.has(p + "rope.scale_linear")) {
    // Older GGUFs spell linear scaling this way.
    Result<double> factor = f.getF64(p + "rope.scale_linear");
    if (!factor)
      return factor.status();
    if (*factor > 0.0)
      c.ropeLinearScale = *factor;
  }

  const TensorInfo *embd = f.findTensor("token_embd.weight");
  if (!embd)
    return Status::error(f.name() + ": missing tensor 'token_embd.weight'");
  if (embd->ne[0] != c.hidden || embd->ne[2] != 1 || embd->ne[3] != 1)
    return Status::error(f.name() + ": tensor 'token_embd.weight' has shape " +
                         embd->shapeString() + ", expected [" +
                         std::to_string(c.hidden) + ", n_vocab]");
  c.vocab = embd->ne[1];
  if (c.vocab <= 0 || c.vocab > limits::kMaxVocab)
    return Status::error(f.name() + ": vocabulary of " +
                         std::to_string(c.vocab) + " tokens; accepted: 1 to " +
                         std::to_string(limits::kMaxVocab));
  Result<bool> output = holds(f, info->outputWeight, "output.weight");
  Result<bool> qkvBias = holds(f, info->qkvBias, "blk.0.attn_q.bias");
  Result<bool> outputBias =
      holds(f, info->outputBias, "blk.0.attn_output.bias");
  for (const Result<bool> *r : {&output, &qkvBias, &outputBias})
    if (!*r)
      return r->status();
  c.tiedOutput = !*output;
  c.ropeFactors = f.findTensor("rope_freqs.weight") != nullptr;
  c.attentionBias = *qkvBias;
  c.outputBias = *outputBias;
  Result<bool> qkNorm = holds(f, info->qkNorm, "blk.0.attn_q_norm.weight");
  Result<bool> postNorms =
      holds(f, info->postNorms, "blk.0.post_attention_norm.weight");
  for (const Result<bool> *r : {&qkNorm, &postNorms})
    if (!*r)
      return r->status();
  c.qkNorm = *qkNorm;
  c.postNorms = *postNorms;
  if (info->scaleEmbedding)
    c.embedScale = float(std::sqrt(double(c.hidden)));
  if (info->widthScaleLayers > 0 && c.numLayers == info->widthScaleLayers)
    c.attentionScale = float(1.0 / std::sqrt(double(c.hidden / c.qHeads)));
  return c;
}

void WeightMatrix::rowsF32(int64_t first, int64_t count, float *out) const {
  if (!quantized()) {
    std::memcpy(out, f32_.data() + size_t(first) * size_t(cols_),
                size_t(count) * size_t(cols_) * sizeof(float));
    return;
  }
  for (const Segment &s : segments_) {
    const int64_t lo = std::max(first, s.firstRow),
                  hi = std::min(first + count, s.firstRow + s.rows);
    if (lo >= hi)
      continue;
    // Types and sizes were checked when the matrix was loaded.
    (void)model::dequantize(
        model::GGMLType(s.type),
        blocks_.data() + s.offset + size_t(lo - s.firstRow) * size_t(s.rowBytes),
        size_t(hi - lo) * size_t(s.rowBytes), (hi - lo) * cols_,
        out + size_t(lo - first) * size_t(cols_));
  }
}

void WeightMatrix::dotRows(int64_t first, int64_t count, const float *x,
                           const float *xSums, float *out) const {
  if (!quantized()) {
    for (int64_t r = 0; r < count; ++r) {
      const float *w = f32_.data() + size_t(first + r) * size_t(cols_);
      float sum = 0.0f;
      for (int64_t c = 0; c < cols_; ++c)
        sum += w[c] * x[c];
      out[r] = sum;
    }
    return;
  }
  for (const Segment &s : segments_) {
    const int64_t lo = std::max(first, s.firstRow),
                  hi = std::min(first + count, s.firstRow + s.rows);
    if (lo < hi)
      model::dotRows(model::GGMLType(s.type),
                     blocks_.data() + s.offset +
                         size_t(lo - s.firstRow) * size_t(s.rowBytes),
                     size_t(s.rowBytes), hi - lo, cols_, x, xSums,
                     out + (lo - first));
  }
}

std::vector<float> WeightMatrix::toF32() const {
  std::vector<float> v(size_t(rows_) * size_t(cols_));
  rowsF32(0, rows_, v.data());
  return v;
}

std::vector<uint16_t> WeightMatrix::toBF16() const {
  const size_t cols = size_t(cols_);
  std::vector<uint16_t> v(size_t(rows_) * cols);
  // Tiles of rows in parallel (an 8B model has 7.5e9 elements); a quantised
  // tile is decoded to float32 first.
  constexpr int64_t kTileRows = 64;
  const int64_t tiles = (rows_ + kTileRows - 1) / kTileRows;
#pragma omp parallel
  {
    std::vector<float> tile(quantized() ? size_t(kTileRows) * cols : 0);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t first = t * kTileRows,
                    count = std::min(kTileRows, rows_ - first);
      const float *src = tile.data();
      if (quantized())
        rowsF32(first, count, tile.data());
      else
        src = f32_.data() + size_t(first) * cols;
      floatsToBF16(src, size_t(count) * cols, v.data() + size_t(first) * cols);
    }
  }
  return v;
}

int64_t WeightMatrix::bytes() const {
  return int64_t(f32_.size() * sizeof(float) + blocks_.size());
}

Status ModelWeights::loadMatrix(
    const GGUFFile &f,
    const std::vector<std::pair<std::string, int64_t>> &tensors, int64_t cols,
    WeightStorage storage, WeightMatrix &out) {
  int64_t rows = 0;
  for (const auto &[name, r] : tensors)
    rows += r;
  out.rows_ = rows;
  out.cols_ = cols;
  if (storage == WeightStorage::Float32)
    out.f32_.resize(size_t(rows) * size_t(cols));
  std::vector<float> tile;
  int64_t row = 0;
  for (const auto &[name, r] : tensors) {
    Result<const TensorInfo *> t = expectTensor(f, name, cols, r);
    if (!t)
      return t.status();
    const TensorInfo &info = **t;
    if (storage == WeightStorage::Quantized) {
      WeightMatrix::Segment seg;
      seg.type = uint32_t(info.type);
      seg.firstRow = row;
      seg.rows = r;
      seg.rowBytes = int64_t(info.rowBytes);
      seg.offset = out.blocks_.size();
      const uint8_t *src = f.tensorData(info);
      out.blocks_.insert(out.blocks_.end(), src,
                         src + size_t(r) * size_t(info.rowBytes));
      out.segments_.push_back(seg);
    }
    // Decoded a tile at a time: into place for float32, else into a
    // scratch tile, only to check the values.
    const int64_t tileRows = std::max<int64_t>(1, (int64_t(1) << 16) / cols);
    for (int64_t first = 0; first < r; first += tileRows) {
      const int64_t n = std::min(tileRows, r - first);
      float *dst;
      if (storage == WeightStorage::Float32) {
        dst = out.f32_.data() + size_t(row + first) * size_t(cols);
      } else {
        tile.resize(size_t(n * cols));
        dst = tile.data();
      }
      CONDENSATE_RETURN_IF_ERROR(f.dequantizeRows(info, first, n, dst));
      if (int64_t at = firstNonFinite(dst, n * cols); at >= 0)
        return nonFiniteError(f, name, dst[at], first * cols + at);
    }
    row += r;
  }
  return Status::success();
}

Result<std::shared_ptr<const ModelWeights>>
ModelWeights::load(const std::string &path, WeightStorage storage) {
  Result<GGUFFile> file = GGUFFile::open(path);
  if (!file)
    return file.status();
  return load(*file, storage);
}

Result<std::shared_ptr<const ModelWeights>>
ModelWeights::load(const GGUFFile &f, WeightStorage storage) {
  Result<ModelConfig> config = readConfig(f);
  if (!config)
    return config.status();
  auto w = std::make_shared<ModelWeights>();
  w->config_ = *config;
  const ModelConfig &c = w->config_;
  const int64_t H = c.hidden;
  CONDENSATE_RETURN_IF_ERROR(checkShapes(f, c));
  if (storage == WeightStorage::Auto) {
    // The file's blocks where this CPU multiplies every matrix's type in
    // place (faster than float32 and a quarter of its bytes or less); else
    // the float32 copy of every matrix against half the physical memory.
    double f32Bytes = 0.0;
    bool everyMatrixFast = true;
    for (const TensorInfo &t : f.tensors()) {
      f32Bytes += 4.0 * double(t.numElements);
      if (t.numDims >= 2 && !model::dotRowsFast(t.type))
        everyMatrixFast = false;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double memory = pages > 0 && page > 0 ? double(pages) * double(page)
                                                : 0.0;
    storage = everyMatrixFast || (memory > 0.0 && f32Bytes > memory / 2)
                  ? WeightStorage::Quantized
                  : WeightStorage::Float32;
  }
  w->storage_ = storage;
  try {
    CONDENSATE_RETURN_IF_ERROR(loadMatrix(
        f, {{"token_embd.weight", c.vocab}}, H, storage, w->tokenEmbd_));
    if (!c.tiedOutput)
      CONDENSATE_RETURN_IF_ERROR(loadMatrix(f, {{"output.weight", c.vocab}}, H,
                                            storage, w->output_));
    CONDENSATE_RETURN_IF_ERROR(
        loadTensor(f, "output_norm.weight", H, 0, w->outputNorm_));
    if (c.ropeFactors) {
      CONDENSATE_RETURN_IF_ERROR(loadTensor(f, "rope_freqs.weight",
                                            c.ropeDim / 2, 0, w->ropeFactors_));
      for (float v : w->ropeFactors_)
        if (!(v > 0.0f))
          return Status::error(f.name() + ": tensor 'rope_freqs.weight' holds " +
                               std::to_string(v) + "; RoPE factors must be > 0");
    }
    w->layers_.resize(size_t(c.numLayers));
    for (int64_t l = 0; l < c.numLayers; ++l) {
      LayerWeights &L = w->layers_[size_t(l)];
      const std::string b = "blk." + std::to_string(l) + ".";
      CONDENSATE_RETURN_IF_ERROR(
          loadTensor(f, b + "attn_norm.weight", H, 0, L.attnNorm));
      CONDENSATE_RETURN_IF_ERROR(loadMatrix(f,
                                            {{b + "attn_q.weight", c.qDim()},
                                             {b + "attn_k.weight", c.kvDim()},
                                             {b + "attn_v.weight", c.kvDim()}},
                                            H, storage, L.wqkv));
      if (c.attentionBias) {
        L.bqkv.resize(size_t(c.qkvDim()));
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "attn_q.bias", c.qDim(), 0, L.bqkv));
        CONDENSATE_RETURN_IF_ERROR(loadTensor(f, b + "attn_k.bias", c.kvDim(),
                                              0, L.bqkv, size_t(c.qDim())));
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "attn_v.bias", c.kvDim(), 0, L.bqkv,
                       size_t(c.qDim() + c.kvDim())));
      }
      CONDENSATE_RETURN_IF_ERROR(loadMatrix(
          f, {{b + "attn_output.weight", H}}, c.qDim(), storage, L.wo));
      if (c.outputBias)
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "attn_output.bias", H, 0, L.bo));
      CONDENSATE_RETURN_IF_ERROR(
          loadTensor(f, b + "ffn_norm.weight", H, 0, L.ffnNorm));
      CONDENSATE_RETURN_IF_ERROR(
          loadMatrix(f, {{b + "ffn_gate.weight", c.ffn}, {b + "ffn_up.weight", c.ffn}},
                     H, storage, L.wGateUp));
      CONDENSATE_RETURN_IF_ERROR(loadMatrix(f, {{b + "ffn_down.weight", H}},
                                            c.ffn, storage, L.wDown));
      if (c.qkNorm) {
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "attn_q_norm.weight", c.headDim, 0, L.qNorm));
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "attn_k_norm.weight", c.headDim, 0, L.kNorm));
      }
      if (c.postNorms) {
        CONDENSATE_RETURN_IF_ERROR(loadTensor(
            f, b + "post_attention_norm.weight", H, 0, L.postAttnNorm));
        CONDENSATE_RETURN_IF_ERROR(
            loadTensor(f, b + "post_ffw_norm.weight", H, 0, L.postFfnNorm));
      }
    }
  } catch (const std::bad_alloc &) {
    return Status::error(f.name() + ": out of memory loading the weights" +
                         (storage == WeightStorage::Float32
                              ? std::string(" as float32")
                              : std::string()));
  }
  return std::shared_ptr<const ModelWeights>(std::move(w));
}

std::vector<double> ModelWeights::ropeFrequencies(bool local) const {
  const ModelConfig &c = config_;
  // A representative layer of the kind asked for (the bases and scaling
  // depend only on the kind).
  int64_t layer = 0;
  while (layer + 1 < c.numLayers && c.localLayer(layer) != local)
    ++layer;
  std::vector<double> f(size_t(c.ropeDim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(c.ropeThetaFor(layer),
                    -2.0 * double(i) / double(c.ropeDim)) /
           (ropeFactors_.empty() ? 1.0 : double(ropeFactors_[i])) /
           c.ropeScaleFor(layer);
  return f;
}

namespace {

/// A real architecture's shape, for ModelWeights::dummy.
struct DummyArchitecture {
  const char *name;
  const char *architecture; ///< its GGUF general.architecture
  int64_t layers, hidden, ffn, qHeads, kvHeads, headDim, vocab, context;
  double ropeTheta;
  bool qkvBias, tied;
};

/// From the models' published configurations (Hugging Face config.json):
/// Llama-3.2-1B, Meta-Llama-3-8B, Qwen2.5-7B, Qwen2.5-0.5B; tiny-llama is
/// a small Llama-shaped model for tests.
constexpr DummyArchitecture kDummyArchitectures[] = {
    {"llama-3.2-1b", "llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072,
     500000.0, false, true},
    {"llama-3-8b", "llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072,
     500000.0, false, false},
    {"qwen2.5-7b", "qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 131072,
     1000000.0, true, false},
    {"qwen2.5-0.5b", "qwen2", 24, 896, 4864, 14, 2, 64, 151936, 32768,
     1000000.0, true, true},
    {"tiny-llama", "llama", 2, 128, 256, 4, 2, 32, 512, 4096, 10000.0,
     false, true},
};

/// Uniform in [-scale, scale) from (seed, stream, index): splitmix64, so
/// any element is drawn independently of the others (threads fill rows in
/// any order and get the same values).
inline float dummyValue(uint64_t seed, uint64_t stream, uint64_t i,
                        float scale) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xBF58476D1CE4E5B9ull +
               i * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return scale * (float(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

void fillDummy(std::vector<float> &v, size_t n, uint64_t seed,
               uint64_t stream, float scale) {
  v.resize(n);
  const int64_t count = int64_t(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    v[size_t(i)] = dummyValue(seed, stream, uint64_t(i), scale);
}

} // namespace

std::string ModelWeights::dummyArchitectures() {
  std::string names;
  for (const DummyArchitecture &a : kDummyArchitectures)
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

Result<std::shared_ptr<const ModelWeights>>
ModelWeights::dummy(const std::string &name, uint64_t seed) {
  const DummyArchitecture *arch = nullptr;
  for (const DummyArchitecture &a : kDummyArchitectures)
    if (name == a.name)
      arch = &a;
  if (!arch)
    return Status::error("unknown dummy architecture '" + name +
                         "' (known: " + dummyArchitectures() + ")");
  const Architecture *info = findArchitecture(arch->architecture);
  auto w = std::make_shared<ModelWeights>();
  ModelConfig &c = w->config_;
  c.architecture = std::string(arch->architecture) + " (dummy " + name + ")";
  c.numLayers = arch->layers;
  c.hidden = arch->hidden;
  c.ffn = arch->ffn;
  c.qHeads = arch->qHeads;
  c.kvHeads = arch->kvHeads;
  c.headDim = arch->headDim;
  c.vocab = arch->vocab;
  c.contextLength = arch->context;
  c.ropeDim = arch->headDim;
  c.ropeTheta = arch->ropeTheta;
  c.ropeMode = info->rope;
  c.activation = info->activation;
  c.rmsEps = 1e-5;
  c.attentionBias = arch->qkvBias;
  c.tiedOutput = arch->tied;
  w->storage_ = WeightStorage::Float32;
  uint64_t stream = 0;
  auto matrix = [&](WeightMatrix &m, int64_t rows, int64_t cols) {
    m.rows_ = rows;
    m.cols_ = cols;
    fillDummy(m.f32_, size_t(rows) * size_t(cols), seed, ++stream,
              float(1.0 / std::sqrt(double(cols))));
  };
  auto ones = [](std::vector<float> &v, int64_t n) {
    v.assign(size_t(n), 1.0f);
  };
  try {
    matrix(w->tokenEmbd_, c.vocab, c.hidden);
    if (!c.tiedOutput)
      matrix(w->output_, c.vocab, c.hidden);
    ones(w->outputNorm_, c.hidden);
    w->layers_.resize(size_t(c.numLayers));
    for (LayerWeights &L : w->layers_) {
      ones(L.attnNorm, c.hidden);
      ones(L.ffnNorm, c.hidden);
      matrix(L.wqkv, c.qkvDim(), c.hidden);
      if (c.attentionBias)
        fillDummy(L.bqkv, size_t(c.qkvDim()), seed, ++stream, 0.1f);
      matrix(L.wo, c.hidden, c.qDim());
      matrix(L.wGateUp, 2 * c.ffn, c.hidden);
      matrix(L.wDown, c.hidden, c.ffn);
    }
  } catch (const std::bad_alloc &) {
    return Status::error("out of memory making the dummy weights of " + name);
  }
  return std::shared_ptr<const ModelWeights>(std::move(w));
}

int64_t ModelWeights::bytes() const {
  size_t n = outputNorm_.size() + ropeFactors_.size();
  int64_t matrices = tokenEmbd_.bytes() + output_.bytes();
  for (const LayerWeights &L : layers_) {
    n += L.attnNorm.size() + L.bqkv.size() + L.bo.size() + L.ffnNorm.size() +
         L.qNorm.size() + L.kNorm.size() + L.postAttnNorm.size() +
         L.postFfnNorm.size();
    matrices += L.wqkv.bytes() + L.wo.bytes() + L.wGateUp.bytes() +
                L.wDown.bytes();
  }
  return int64_t(n * sizeof(float)) + matrices;
}

} // namespace condensate::decoder
