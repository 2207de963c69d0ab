//===- Capture.cpp - condensate-decode --capture-kv -----------------------===//
#include "Capture.h"

#include "ToolSupport.h"

#include "condensate/Runtime/Policy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace condensate::tools {
namespace {

/// A .npy file (format 1.0) written a block at a time: the header names
/// dtype `descr` and `shape`; the data follow in C order.
class NpyWriter {
public:
  NpyWriter(const std::string &path, const std::string &descr,
            const std::vector<int64_t> &shape)
      : path_(path), out_(path, std::ios::binary) {
    if (!out_)
      fail("--capture-kv: cannot write " + path);
    std::string dict =
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i)
      dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : "") +
              (i + 1 < shape.size() ? ", " : "");
    dict += "), }";
    // Magic, version, header length, then the dict padded with spaces and a
    // newline so that the data start on a multiple of 64 bytes.
    const size_t unpadded = 10 + dict.size() + 1;
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict += '\n';
    const uint16_t len = uint16_t(dict.size());
    const char head[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out_.write(head, 8);
    const char lenBytes[2] = {char(len & 0xff), char(len >> 8)};
    out_.write(lenBytes, 2);
    out_.write(dict.data(), std::streamsize(dict.size()));
  }
  void write(const void *data, size_t bytes) {
    out_.write(static_cast<const char *>(data), std::streamsize(bytes));
  }
  void close() {
    out_.close();
    if (!out_)
      fail("--capture-kv: writing " + path_ + " failed");
  }

private:
  std::string path_;
  std::ofstream out_;
};

std::vector<int64_t> parseLayers(const std::string &text, int64_t numLayers) {
  std::vector<int64_t> layers;
  if (text.empty()) {
    for (int64_t l = 0; l < numLayers; ++l)
      layers.push_back(l);
    return layers;
  }
  std::set<int64_t> seen;
  for (const std::string &item : nonEmptyList("--capture-layers", text)) {
    const int64_t l = parseInt("--capture-layers", item, 0, numLayers - 1);
    if (!seen.insert(l).second)
      fail("--capture-layers: layer " + item + " is named twice");
    layers.push_back(l);
  }
  return layers;
}

const char *npyDescr(KVType t) {
  switch (t) {
  case KVType::F32:
    return "<f4";
  case KVType::F16:
    return "<f2";
  case KVType::BF16:
    return "<u2"; // numpy has no bfloat16: its bits
  }
  return "<f4";
}

} // namespace

std::string captureKV(std::shared_ptr<const decoder::ModelWeights> weights,
                      const std::vector<int32_t> &prompt,
                      const CaptureRequest &request) {
  const decoder::ModelConfig &cfg = weights->config();
  const std::vector<int64_t> layers =
      parseLayers(request.layers, cfg.numLayers);
  const int64_t n = int64_t(prompt.size());
  if (n < 2)
    fail("--capture-kv: the prompt needs at least 2 tokens (the last one "
         "is decoded)");
  std::error_code ec;
  std::filesystem::create_directories(request.dir, ec);
  if (ec || !std::filesystem::is_directory(request.dir))
    fail("--capture-kv: cannot create the folder " + request.dir);

  decoder::DecoderOptions opts;
  opts.kvType = request.kvType;
  opts.threads = request.threads;
  opts.maxTokens = n;
  auto dec = take(decoder::Decoder::create(
      weights, Schedule::uniform(cfg.numLayers, Policy::makeDense()), opts));
  const decoder::Decoder::SeqId seq = dec->newSequence();
  check(dec->prefill(seq, prompt.data(), n - 1, nullptr));
  check(dec->step(seq, prompt.back(), nullptr));

  const ModelShape &s = dec->shape();
  const int64_t hq = s.qHeads, hkv = s.kvHeads, d = s.headDim;
  const int64_t p = s.pageSize;
  const size_t elem = size_t(kvTypeBytes(s.kvType));
  const std::vector<int32_t> &pages = dec->pages(seq);
  const int64_t L = int64_t(layers.size());
  const std::string dir = request.dir + "/";

  // Queries: [layers, q_heads, head_dim] of the step (batch 1).
  const std::vector<float> &queries = dec->lastQueries();
  NpyWriter q(dir + "q.npy", "<f4", {L, hq, d});
  for (int64_t l : layers)
    q.write(queries.data() + l * hq * d, size_t(hq * d) * sizeof(float));
  q.close();

  // Keys and values in sequence order through the page table: the pool is
  // [pages, kv_heads, page_size, head_dim].
  NpyWriter k(dir + "k.npy", npyDescr(s.kvType), {L, hkv, n, d});
  NpyWriter v(dir + "v.npy", npyDescr(s.kvType), {L, hkv, n, d});
  for (int64_t l : layers) {
    const decoder::Decoder::CacheView view = dec->cache(l);
    const auto *kb = static_cast<const char *>(view.k);
    const auto *vb = static_cast<const char *>(view.v);
    for (int64_t g = 0; g < hkv; ++g)
      for (int64_t t0 = 0; t0 < n; t0 += p) {
        const int64_t page = pages[size_t(t0 / p)];
        const int64_t rows = std::min(p, n - t0);
        const size_t at = size_t(((page * hkv + g) * p) * d) * elem;
        k.write(kb + at, size_t(rows * d) * elem);
        v.write(vb + at, size_t(rows * d) * elem);
      }
  }
  k.close();
  v.close();

  nlohmann::json meta = {
      {"model", request.modelPath},
      {"architecture", cfg.architecture},
      {"model_layers", cfg.numLayers},
      {"layers", layers},
      {"context", n},
      {"q_heads", hq},
      {"kv_heads", hkv},
      {"head_dim", d},
      {"kv_type", kvTypeName(s.kvType)},
      {"scale", s.effectiveScale()},
      {"prompt_ids", prompt}};
  std::ofstream js(dir + "capture.json");
  js << meta.dump(1) << "\n";
  js.close();
  if (!js)
    fail("--capture-kv: writing " + dir + "capture.json failed");
  return "captured " + std::to_string(L) + " layers x " + std::to_string(hkv) +
         " kv heads x " + std::to_string(n) + " positions (" +
         kvTypeName(s.kvType) + ") and the step's queries in " + request.dir;
}

} // namespace condensate::tools
