//===- FuzzGGUF.cpp - libFuzzer target: GGUF reader, dequant, tokenizer ---===//
//
// Any byte string is a candidate GGUF file: parse it, read every metadata
// value, dequantise the first rows of every tensor (bounded), build the
// tokenizer and round-trip a few strings through it. Nothing may crash,
// hang or allocate without bound; errors are expected.
//
//===----------------------------------------------------------------------===//
#include "condensate/Model/GGUF.h"
#include "condensate/Model/Tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace condensate;
using namespace condensate::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto file = GGUFFile::fromBuffer(std::vector<uint8_t>(data, data + size),
                                   "fuzz.gguf");
  if (!file.ok())
    return 0;
  for (const auto &kv : file->metadata())
    (void)kv.first.size();
  std::vector<float> rows;
  for (const TensorInfo &t : file->tensors()) {
    int64_t n = std::min<int64_t>(t.numRows(), 4);
    if (n <= 0 || t.ne[0] > (1 << 16))
      continue;
    rows.resize(size_t(n * t.ne[0]));
    (void)file->dequantizeRows(t, 0, n, rows.data());
  }
  auto tokenizer = Tokenizer::fromGGUF(*file);
  if (!tokenizer.ok())
    return 0;
  for (const char *text : {"Hello, world!", "  12345 tokens\n\t", "\xc3\xa9t\xc3\xa9"}) {
    std::vector<int32_t> ids = tokenizer->encode(text, true, true);
    (void)tokenizer->decode(ids);
  }
  return 0;
}
