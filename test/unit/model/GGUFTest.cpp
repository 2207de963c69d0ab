//===- GGUFTest.cpp - GGUF parsing, validation and dequantisation ---------===//

#include "ModelTestSupport.h"

#include "condensate/Model/GGUF.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

using namespace condensate;
using namespace condensate::model;
using namespace condensate::model::testsupport;

namespace {

uint32_t code(GGMLType t) { return static_cast<uint32_t>(t); }

Result<GGUFFile> parse(const GGUFBuilder &builder,
                       const std::string &name = "test.gguf") {
  return GGUFFile::fromBuffer(builder.build(), name);
}

/// Parses and expects failure with a one-line message containing `needle`.
void expectParseError(const std::vector<uint8_t> &bytes,
                      const std::string &needle) {
  Result<GGUFFile> f = GGUFFile::fromBuffer(bytes, "bad.gguf");
  ASSERT_FALSE(f.ok()) << "expected an error containing: " << needle;
  expectOneLineError(f.status(), "bad.gguf: ");
  EXPECT_NE(f.message().find(needle), std::string::npos) << f.message();
}

void expectParseError(const GGUFBuilder &builder, const std::string &needle) {
  expectParseError(builder.build(), needle);
}

std::vector<uint8_t> floatBytes(const std::vector<float> &v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

//===----------------------------------------------------------------------===//
// Reference decoders written from ggml's block definitions, one element at a
// time (the library decodes block-wise; the two formulations must agree).
//===----------------------------------------------------------------------===//

float refHalf(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exponent == 0)
    v = std::ldexp(double(mantissa), -24);
  else if (exponent == 31)
    v = mantissa ? std::numeric_limits<double>::quiet_NaN()
                 : std::numeric_limits<double>::infinity();
  else
    v = std::ldexp(double(1024 + mantissa), exponent - 25);
  return float(sign ? -v : v);
}

uint16_t u16At(const uint8_t *p) { return uint16_t(p[0] | (p[1] << 8)); }
float halfAt(const uint8_t *p) { return refHalf(u16At(p)); }

/// Nibble `e` (0..31) of a 16-byte array: low nibbles first, then high.
int nibble32(const uint8_t *qs, int e) {
  return e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
}

/// 6-bit scale and min of sub-block `s` (0..7) of Q4_K/Q5_K: bytes 0-3 hold
/// scales 0-3 (low 6 bits), 4-7 mins 0-3, 8-11 the low 4 bits of scale and
/// min 4-7, whose top 2 bits sit in the spare top bits of bytes 0-7.
void refScaleMin(const uint8_t *s, int sub, int &scale, int &min) {
  if (sub < 4) {
    scale = s[sub] & 63;
    min = s[sub + 4] & 63;
  } else {
    scale = (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4);
    min = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
  }
}

/// Element `e` of the block at `b`.
float refElement(GGMLType type, const uint8_t *b, int e) {
  switch (type) {
  case GGMLType::Q4_0:
    return float(nibble32(b + 2, e) - 8) * halfAt(b);
  case GGMLType::Q4_1:
    return float(nibble32(b + 4, e)) * halfAt(b) + halfAt(b + 2);
  case GGMLType::Q5_0: {
    const uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | (uint32_t(b[5]) << 24);
    const int q = nibble32(b + 6, e) | int((qh >> e) & 1) << 4;
    return float(q - 16) * halfAt(b);
  }
  case GGMLType::Q5_1: {
    const uint32_t qh = b[4] | (b[5] << 8) | (b[6] << 16) | (uint32_t(b[7]) << 24);
    const int q = nibble32(b + 8, e) | int((qh >> e) & 1) << 4;
    return float(q) * halfAt(b) + halfAt(b + 2);
  }
  case GGMLType::Q8_0:
    return float(int8_t(b[2 + e])) * halfAt(b);
  case GGMLType::Q4_K:
  case GGMLType::Q5_K: {
    const int sub = e / 32;
    const uint8_t *qs = b + (type == GGMLType::Q4_K ? 16 : 48);
    const uint8_t byte = qs[(sub / 2) * 32 + e % 32];
    int q = (sub % 2) ? (byte >> 4) : (byte & 15);
    if (type == GGMLType::Q5_K)
      q += 16 * ((b[16 + e % 32] >> sub) & 1);
    int scale, min;
    refScaleMin(b + 4, sub, scale, min);
    return (halfAt(b) * float(scale)) * float(q) -
           halfAt(b + 2) * float(min);
  }
  case GGMLType::Q6_K: {
    const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    const uint8_t low = b[half * 64 + (quarter & 1) * 32 + l];
    const int lo4 = quarter >= 2 ? (low >> 4) : (low & 15);
    const int hi2 = (b[128 + half * 32 + l] >> (2 * quarter)) & 3;
    const int q = (lo4 | hi2 << 4) - 32;
    const int scale = int8_t(b[192 + half * 8 + quarter * 2 + l / 16]);
    return halfAt(b + 208) * float(scale) * float(q);
  }
  default:
    ADD_FAILURE() << "no reference decoder for " << ggmlTypeName(type);
    return 0;
  }
}

std::vector<float> refDecode(GGMLType type, const std::vector<uint8_t> &data) {
  const GGMLTypeTraits *traits = ggmlTypeTraits(code(type));
  std::vector<float> out;
  for (size_t off = 0; off + traits->blockBytes <= data.size();
       off += traits->blockBytes) {
    const uint8_t *b = data.data() + off;
    for (int e = 0; e < traits->blockSize; ++e) {
      if (type == GGMLType::F32) {
        float f;
        std::memcpy(&f, b, 4);
        out.push_back(f);
      } else if (type == GGMLType::F16) {
        out.push_back(halfAt(b));
      } else if (type == GGMLType::BF16) {
        const uint32_t bits = uint32_t(u16At(b)) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out.push_back(f);
      } else {
        out.push_back(refElement(type, b, e));
      }
    }
  }
  return out;
}

/// Equal, both NaN, or within a rounding step (formulations may differ).
::testing::AssertionResult sameFloat(float a, float b) {
  if (std::isnan(a) && std::isnan(b))
    return ::testing::AssertionSuccess();
  if (a == b || std::fabs(a - b) <= 1e-6f * std::max(std::fabs(a), std::fabs(b)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " != " << b;
}

/// Offsets of the fp16 scale fields inside one block of `type`.
std::vector<int> halfFields(GGMLType type) {
  switch (type) {
  case GGMLType::Q4_0:
  case GGMLType::Q5_0:
  case GGMLType::Q8_0:
    return {0};
  case GGMLType::Q4_1:
  case GGMLType::Q5_1:
  case GGMLType::Q4_K:
  case GGMLType::Q5_K:
    return {0, 2};
  case GGMLType::Q6_K:
    return {208};
  default:
    return {};
  }
}

/// Random blocks whose fp16 scales are finite (normal or subnormal).
std::vector<uint8_t> randomBlocks(GGMLType type, int64_t numBlocks,
                                  std::mt19937 &rng) {
  const GGMLTypeTraits *traits = ggmlTypeTraits(code(type));
  std::vector<uint8_t> data(size_t(numBlocks * traits->blockBytes));
  for (uint8_t &b : data)
    b = uint8_t(rng());
  if (type == GGMLType::F32) {
    std::normal_distribution<float> normal(0.f, 3.f);
    for (size_t i = 0; i < data.size(); i += 4) {
      const float f = normal(rng);
      std::memcpy(&data[i], &f, 4);
    }
  }
  for (int64_t block = 0; block < numBlocks; ++block) {
    for (int field : halfFields(type)) {
      uint16_t h = uint16_t(rng());
      h = uint16_t((h & 0x83FF) | ((rng() % 31) << 10)); // exponent 0..30
      data[size_t(block * traits->blockBytes + field)] = uint8_t(h);
      data[size_t(block * traits->blockBytes + field + 1)] = uint8_t(h >> 8);
    }
  }
  return data;
}

/// The dequantisation test set: tensors of every decodable type.
struct QuantTensor {
  std::string name;
  GGMLType type;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> data;
};

std::vector<QuantTensor> quantTensors(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<QuantTensor> out;
  // Every fp16 / bf16 bit pattern, NaNs and subnormals included.
  std::vector<uint8_t> all16(65536 * 2);
  for (uint32_t i = 0; i < 65536; ++i) {
    all16[2 * i] = uint8_t(i);
    all16[2 * i + 1] = uint8_t(i >> 8);
  }
  out.push_back({"f16.all", GGMLType::F16, {256, 256}, all16});
  out.push_back({"bf16.all", GGMLType::BF16, {512, 128}, all16});
  out.push_back({"f32.rand", GGMLType::F32, {48, 5},
                 randomBlocks(GGMLType::F32, 240, rng)});
  for (GGMLType t : {GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,
                     GGMLType::Q5_1, GGMLType::Q8_0})
    out.push_back({ggmlTypeName(t) + ".rand", t, {96, 5, 2},
                   randomBlocks(t, 3 * 10, rng)});
  for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K})
    out.push_back({ggmlTypeName(t) + ".rand", t, {512, 7},
                   randomBlocks(t, 2 * 7, rng)});
  return out;
}

GGUFBuilder quantFile(const std::vector<QuantTensor> &tensors) {
  GGUFBuilder b;
  b.addString("general.architecture", "test");
  for (const QuantTensor &t : tensors)
    b.addTensor(t.name, code(t.type), t.dims, t.data);
  return b;
}

/// A small valid file touching every metadata type and two tensors; its last
/// tensor ends at end of file, so every strict prefix is damaged.
std::vector<uint8_t> smallValidFile() {
  GGUFBuilder b;
  b.addScalar<uint8_t>("u8", ValueType::UInt8, 200)
      .addScalar<int8_t>("i8", ValueType::Int8, -100)
      .addScalar<uint16_t>("u16", ValueType::UInt16, 60000)
      .addScalar<int16_t>("i16", ValueType::Int16, -30000)
      .addU32("u32", 4000000000u)
      .addScalar<int32_t>("i32", ValueType::Int32, -2000000000)
      .addF32("f32", 1.5f)
      .addBool("bool", true)
      .addString("str", "hello")
      .addScalar<uint64_t>("u64", ValueType::UInt64, 1ull << 63)
      .addScalar<int64_t>("i64", ValueType::Int64, -(1ll << 62))
      .addScalar<double>("f64", ValueType::Float64, 0.25)
      .addArray<int32_t>("arr.i32", ValueType::Int32, {1, -2, 3})
      .addStringArray("arr.str", {"a", "", "ccc"});
  {
    Bytes nested; // array of 2 arrays of uint16
    nested.put<uint32_t>(uint32_t(ValueType::Array)).put<uint64_t>(2);
    nested.put<uint32_t>(uint32_t(ValueType::UInt16)).put<uint64_t>(1).put<uint16_t>(7);
    nested.put<uint32_t>(uint32_t(ValueType::UInt16)).put<uint64_t>(0);
    b.addRaw("arr.nested", uint32_t(ValueType::Array), nested.data);
  }
  b.addTensor("t.f32", code(GGMLType::F32), {4}, floatBytes({1, 2, 3, 4}));
  std::vector<uint8_t> q8(34 * 2, 1);
  b.addTensor("t.q8", code(GGMLType::Q8_0), {32, 2}, q8);
  return b.build();
}

} // namespace

//===----------------------------------------------------------------------===//
// Metadata
//===----------------------------------------------------------------------===//

TEST(GGUFMetadata, EveryValueTypeRoundTrips) {
  Result<GGUFFile> f = GGUFFile::fromBuffer(smallValidFile(), "small.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->dataOffset() % 32, 0u);

  EXPECT_EQ(*f->getU32("u8"), 200u);
  EXPECT_EQ(*f->getI32("i8"), -100);
  EXPECT_EQ(*f->getU32("u16"), 60000u);
  EXPECT_EQ(*f->getI64("i16"), -30000);
  EXPECT_EQ(*f->getU32("u32"), 4000000000u);
  EXPECT_EQ(*f->getI32("i32"), -2000000000);
  EXPECT_EQ(*f->getF32("f32"), 1.5f);
  EXPECT_EQ(*f->getBool("bool"), true);
  EXPECT_EQ(*f->getString("str"), "hello");
  EXPECT_EQ(*f->getU64("u64"), 1ull << 63);
  EXPECT_EQ(*f->getI64("i64"), -(1ll << 62));
  EXPECT_EQ(*f->getF64("f64"), 0.25);
  EXPECT_EQ(*f->getF32("f64"), 0.25f);
  EXPECT_EQ(*f->getI32Array("arr.i32"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(*f->getI64Array("arr.i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f->getStringArray("arr.str"),
            (std::vector<std::string>{"a", "", "ccc"}));

  Result<const Value *> nested = f->getArray("arr.nested");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ((*nested)->elementType(), ValueType::Array);
  ASSERT_EQ((*nested)->size(), 2u);
  Value first = (*nested)->element(0);
  EXPECT_EQ(first.elementType(), ValueType::UInt16);
  ASSERT_EQ(first.size(), 1u);
  uint64_t seven = 0;
  EXPECT_TRUE(first.element(0).asUInt64(seven));
  EXPECT_EQ(seven, 7u);
  EXPECT_EQ((*nested)->element(1).size(), 0u);

  // File order and a dump-style rendering.
  const auto &md = f->metadata();
  ASSERT_EQ(md.size(), 15u);
  EXPECT_EQ(md.front().first, "u8");
  EXPECT_EQ(md.back().first, "arr.nested");
  EXPECT_EQ(md[8].second.toString(), "'hello'");
  EXPECT_EQ(md[12].second.toString(), "int32[3] [1, -2, 3]");
  EXPECT_EQ(md[14].second.toString(), "array[2] [uint16[1] [7], uint16[0] []]");
}

TEST(GGUFMetadata, AccessorErrorsNameTheKey) {
  Result<GGUFFile> f = GGUFFile::fromBuffer(smallValidFile(), "small.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->getU32("llama.block_count").message(),
            "small.gguf: missing key 'llama.block_count'");
  EXPECT_EQ(f->getU32("str").message(),
            "small.gguf: key 'str' has type string, expected uint32");
  EXPECT_EQ(f->getString("u32").message(),
            "small.gguf: key 'u32' has type uint32, expected string");
  EXPECT_EQ(f->getU32("i8").message(),
            "small.gguf: key 'i8' value -100 does not fit uint32");
  EXPECT_EQ(f->getI32("u32").message(),
            "small.gguf: key 'u32' value 4000000000 does not fit int32");
  EXPECT_EQ(f->getI64("u64").message(),
            "small.gguf: key 'u64' value 9223372036854775808 does not fit int64");
  EXPECT_EQ(f->getF32("u32").message(),
            "small.gguf: key 'u32' has type uint32, expected float32");
  EXPECT_EQ(f->getStringArray("arr.i32").message(),
            "small.gguf: key 'arr.i32' has type array of int32, expected "
            "array of string");
  EXPECT_EQ(f->getBool("u8").message(),
            "small.gguf: key 'u8' has type uint8, expected bool");
  EXPECT_FALSE(f->getArray("u8").ok());
  EXPECT_EQ(f->getTensor("nope").message(),
            "small.gguf: no tensor named 'nope'");
}

TEST(GGUFMetadata, AcceptsVersion2AndCustomAlignment) {
  GGUFBuilder b;
  b.version = 2;
  b.alignment = 64;
  b.addU32("general.alignment", 64);
  b.addTensor("a", code(GGMLType::F32), {3}, floatBytes({1, 2, 3}));
  b.addTensor("b", code(GGMLType::F32), {2, 2}, floatBytes({4, 5, 6, 7}));
  Result<GGUFFile> f = parse(b);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->dataOffset() % 64, 0u);
  EXPECT_EQ(f->findTensor("b")->offset, 64u);
  EXPECT_EQ(*f->readTensorF32("b"), (std::vector<float>{4, 5, 6, 7}));
}

//===----------------------------------------------------------------------===//
// Tensor infos
//===----------------------------------------------------------------------===//

TEST(GGUFTensors, InfosShapesAndData) {
  GGUFBuilder b;
  std::vector<uint8_t> q4(20 * 2 * 3 * 2, 0x11);
  b.addTensor("scalar", code(GGMLType::F32), {}, floatBytes({42}));
  b.addTensor("w.q4_1", code(GGMLType::Q4_1), {64, 3, 2}, q4);
  b.addTensor("v.f32", code(GGMLType::F32), {5, 1, 1, 2},
              floatBytes({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  Result<GGUFFile> f = parse(b);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f->tensors().size(), 3u);

  const TensorInfo &scalar = f->tensors()[0];
  EXPECT_EQ(scalar.numDims, 0u);
  EXPECT_EQ(scalar.numElements, 1);
  EXPECT_EQ(*f->readTensorF32("scalar"), std::vector<float>{42});

  const TensorInfo *q = f->findTensor("w.q4_1");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GGMLType::Q4_1);
  EXPECT_EQ(q->numDims, 3u);
  EXPECT_EQ(q->ne, (std::array<int64_t, 4>{64, 3, 2, 1}));
  EXPECT_EQ(q->shapeString(), "[64, 3, 2]");
  EXPECT_EQ(q->numElements, 384);
  EXPECT_EQ(q->rowLength(), 64);
  EXPECT_EQ(q->numRows(), 6);
  EXPECT_EQ(q->rowBytes, 40u);
  EXPECT_EQ(q->numBytes, 240u);
  EXPECT_EQ(q->offset, 32u);
  EXPECT_EQ(q->fileOffset, f->dataOffset() + 32);
  EXPECT_EQ(std::memcmp(f->tensorData(*q), q4.data(), q4.size()), 0);

  const TensorInfo *v = f->findTensor("v.f32");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->numRows(), 2);
  std::vector<float> row(5);
  ASSERT_TRUE(f->dequantizeRows(*v, 1, 1, row.data()).ok());
  EXPECT_EQ(row, (std::vector<float>{5, 6, 7, 8, 9}));
}

TEST(GGUFTensors, RowRangeAndTypeErrors) {
  GGUFBuilder b;
  b.addTensor("v", code(GGMLType::F32), {2, 3}, floatBytes({0, 1, 2, 3, 4, 5}));
  b.addTensor("k2", code(GGMLType::Q2_K), {256}, std::vector<uint8_t>(84));
  Result<GGUFFile> f = parse(b, "rows.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  const TensorInfo &v = *f->findTensor("v");
  std::vector<float> out(8);
  for (auto [first, count] : {std::pair<int64_t, int64_t>{-1, 1}, {0, 4},
                              {3, 1}, {2, 2}, {0, -1},
                              {std::numeric_limits<int64_t>::max(), 2}}) {
    Status s = f->dequantizeRows(v, first, count, out.data());
    expectOneLineError(s, "rows.gguf: tensor 'v'");
    EXPECT_NE(s.message().find("out of range (3 rows)"), std::string::npos)
        << s.message();
  }
  EXPECT_TRUE(f->dequantizeRows(v, 3, 0, out.data()).ok());
  Result<std::vector<float>> k2 = f->readTensorF32("k2");
  ASSERT_FALSE(k2.ok());
  EXPECT_EQ(k2.message(), "rows.gguf: tensor 'k2': dequantize: decoding Q2_K "
                          "tensors is not supported");
}

//===----------------------------------------------------------------------===//
// Dequantisation
//===----------------------------------------------------------------------===//

TEST(GGUFDequant, EveryTypeMatchesReferenceDecoder) {
  const std::vector<QuantTensor> tensors = quantTensors(1234);
  Result<GGUFFile> f = parse(quantFile(tensors));
  ASSERT_TRUE(f.ok()) << f.message();
  for (const QuantTensor &t : tensors) {
    SCOPED_TRACE(t.name);
    const std::vector<float> expected = refDecode(t.type, t.data);
    Result<std::vector<float>> all = f->readTensorF32(t.name);
    ASSERT_TRUE(all.ok()) << all.message();
    ASSERT_EQ(all->size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_TRUE(sameFloat((*all)[i], expected[i])) << "element " << i;

    // A slice of rows decodes to the same values.
    const TensorInfo &info = *f->findTensor(t.name);
    const int64_t first = 1, count = info.numRows() - 2;
    std::vector<float> rows(size_t(count * info.rowLength()));
    ASSERT_TRUE(f->dequantizeRows(info, first, count, rows.data()).ok());
    for (size_t i = 0; i < rows.size(); ++i)
      ASSERT_TRUE(sameFloat(rows[i], expected[first * info.rowLength() + i]));
  }
}

// dotRows (the decode step's products over quantised weights) against
// dequantize() and a float64 dot product, on fresh random blocks of every
// type it takes (seed printed; CONDENSATE_TEST_SEED replays one), with
// poisoned outputs, rows at unaligned offsets and several row lengths.
TEST(GGUFDequant, DotRowsMatchDecodedRows) {
  uint32_t seed = std::random_device{}();
  if (const char *env = std::getenv("CONDENSATE_TEST_SEED"))
    seed = uint32_t(std::strtoul(env, nullptr, 10));
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (CONDENSATE_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  int64_t checked = 0;
  for (GGMLType type : {GGMLType::F32, GGMLType::Q4_0, GGMLType::Q4_1,
                        GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0,
                        GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
    ASSERT_TRUE(dotRowsSupported(type)) << ggmlTypeName(type);
    const GGMLTypeTraits *traits = ggmlTypeTraits(code(type));
    for (int64_t blocksPerRow : {1, 3, 9}) {
      SCOPED_TRACE(ggmlTypeName(type) + " x " + std::to_string(blocksPerRow));
      const int64_t cols = blocksPerRow * traits->blockSize;
      const int64_t rows = 7;
      const size_t rowBytes = size_t(blocksPerRow * traits->blockBytes);
      // One byte of slack in front: rows need not be aligned.
      std::vector<uint8_t> data = randomBlocks(type, rows * blocksPerRow, rng);
      data.insert(data.begin(), uint8_t(rng()));
      std::vector<float> x(static_cast<size_t>(cols)),
          sums(static_cast<size_t>((cols + 31) / 32));
      for (float &v : x)
        v = unit(rng);
      blockSums(x.data(), cols, sums.data());
      std::vector<float> out(size_t(rows),
                             std::numeric_limits<float>::quiet_NaN());
      dotRows(type, data.data() + 1, rowBytes, rows, cols, x.data(),
              sums.data(), out.data());
      std::vector<float> w(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(dequantize(type, data.data() + 1 + size_t(r) * rowBytes,
                               rowBytes, cols, w.data())
                        .ok());
        double exact = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          exact += double(w[size_t(c)]) * double(x[size_t(c)]);
          magnitude += std::fabs(double(w[size_t(c)]) * double(x[size_t(c)]));
        }
        ASSERT_TRUE(std::isfinite(out[size_t(r)])) << "row " << r;
        EXPECT_LE(std::fabs(double(out[size_t(r)]) - exact),
                  4e-6 * magnitude + 1e-30)
            << "row " << r << ": " << out[size_t(r)] << " against " << exact;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 9 * 3 * 7);
}

TEST(GGUFDequant, KnownValues) {
  // Q8_0: d = 0.5 (0x3800), qs = -128, -1, 0, 127, ...
  std::vector<uint8_t> q8(34, 0);
  q8[0] = 0x00, q8[1] = 0x38;
  q8[2] = 0x80, q8[3] = 0xFF, q8[4] = 0x00, q8[5] = 0x7F;
  std::vector<float> out(32);
  ASSERT_TRUE(dequantize(GGMLType::Q8_0, q8.data(), q8.size(), 32, out.data()).ok());
  EXPECT_EQ(out[0], -64.f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[2], 0.f);
  EXPECT_EQ(out[3], 63.5f);
  // Q4_1: d = 1, m = -8 (0xC800); nibbles 0x21 -> elements 0 and 16.
  std::vector<uint8_t> q41(20, 0);
  q41[1] = 0x3C, q41[3] = 0xC8, q41[4] = 0x21;
  ASSERT_TRUE(dequantize(GGMLType::Q4_1, q41.data(), q41.size(), 32, out.data()).ok());
  EXPECT_EQ(out[0], -7.f);
  EXPECT_EQ(out[16], -6.f);
  EXPECT_EQ(out[1], -8.f);
  // Size checks.
  EXPECT_FALSE(dequantize(GGMLType::Q8_0, q8.data(), 33, 32, out.data()).ok());
  EXPECT_FALSE(dequantize(GGMLType::Q8_0, q8.data(), 34, 31, out.data()).ok());
  EXPECT_FALSE(dequantize(GGMLType::IQ2_XS, q8.data(), 34, 256, out.data()).ok());
}

TEST(GGUFDequant, MatchesPythonGGUFPackage) {
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  const std::vector<QuantTensor> tensors = quantTensors(99);
  const std::vector<uint8_t> bytes = quantFile(tensors).build();
  const TempPath path("quant_test.gguf"), out("quant_test.f32");
  writeFile(path, bytes.data(), bytes.size());
  std::string log;
  ASSERT_EQ(runReference("dequant " + shellQuote(path) + " --out " +
                             shellQuote(out),
                         log),
            0)
      << log;
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  const std::string raw = readFile(out);
  const nlohmann::json manifest =
      nlohmann::json::parse(readFile(out.str() + ".json"));
  ASSERT_EQ(manifest["tensors"].size(), tensors.size());
  for (const auto &entry : manifest["tensors"]) {
    const std::string name = entry["name"];
    SCOPED_TRACE(name);
    Result<std::vector<float>> mine = f->readTensorF32(name);
    ASSERT_TRUE(mine.ok()) << mine.message();
    const size_t offset = entry["offset"], count = entry["count"];
    ASSERT_EQ(count, mine->size());
    ASSERT_LE((offset + count) * 4, raw.size());
    for (size_t i = 0; i < count; ++i) {
      float theirs;
      std::memcpy(&theirs, raw.data() + (offset + i) * 4, 4);
      ASSERT_TRUE(sameFloat((*mine)[i], theirs)) << "element " << i;
    }
  }
}

//===----------------------------------------------------------------------===//
// Damaged files
//===----------------------------------------------------------------------===//

TEST(GGUFDamaged, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = smallValidFile();
  ASSERT_TRUE(GGUFFile::fromBuffer(full, "full.gguf").ok());
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
    Result<GGUFFile> f = GGUFFile::fromBuffer(prefix, "cut.gguf");
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    expectOneLineError(f.status(), "cut.gguf: ");
  }
}

TEST(GGUFDamaged, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> full = smallValidFile();
  std::mt19937 rng(7);
  int parsed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> bytes = full;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % bytes.size();
      switch (rng() % 3) {
      case 0:
        bytes[pos] = uint8_t(rng());
        break;
      case 1:
        bytes[pos] ^= uint8_t(1u << (rng() % 8));
        break;
      default: { // A large little-endian number where a count might be.
        const uint64_t big = uint64_t(rng()) << (rng() % 40);
        for (size_t k = 0; k < 8 && pos + k < bytes.size(); ++k)
          bytes[pos + k] = uint8_t(big >> (8 * k));
      }
      }
    }
    Result<GGUFFile> f = GGUFFile::fromBuffer(bytes, "fuzz.gguf");
    if (!f.ok()) {
      expectOneLineError(f.status(), "fuzz.gguf: ");
      continue;
    }
    ++parsed;
    for (const TensorInfo &t : f->tensors()) {
      if (t.numElements > (1 << 20))
        continue;
      std::vector<float> out(size_t(t.numElements));
      (void)f->dequantizeRows(t, 0, t.numRows(), out.data());
    }
    for (const auto &kv : f->metadata())
      (void)kv.second.toString();
  }
  EXPECT_GT(parsed, 0);
}

TEST(GGUFDamaged, HeaderErrors) {
  expectParseError(std::vector<uint8_t>{}, "file is 0 bytes, too small");
  std::vector<uint8_t> file = smallValidFile();
  std::vector<uint8_t> bad = file;
  bad[0] = 'X';
  expectParseError(bad, "bad magic bytes 58 47 55 46 at offset 0");
  for (uint32_t version : {1u, 4u}) {
    bad = file;
    std::memcpy(&bad[4], &version, 4);
    expectParseError(bad, "unsupported GGUF version " + std::to_string(version));
  }
  bad = file;
  const uint32_t swapped = 0x03000000u;
  std::memcpy(&bad[4], &swapped, 4);
  expectParseError(bad, "big-endian");

  Bytes huge;
  huge.raw({'G', 'G', 'U', 'F'}).put<uint32_t>(3).put<uint64_t>(1ull << 40).put<uint64_t>(0);
  huge.data.resize(100, 0);
  expectParseError(huge.data, "tensor count 1099511627776 at offset 8 cannot fit");
  Bytes hugeKV;
  hugeKV.raw({'G', 'G', 'U', 'F'}).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(~0ull);
  expectParseError(hugeKV.data, "metadata count 18446744073709551615 at offset 16");
}

TEST(GGUFDamaged, MetadataErrors) {
  {
    Bytes b; // Key whose length is 2^63.
    b.raw({'G', 'G', 'U', 'F'}).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
    b.put<uint64_t>(1ull << 63).raw({'k', 'e', 'y', 0, 0, 0, 0, 0, 0});
    expectParseError(b.data, "metadata entry #0 key at offset 24 has length "
                             "9223372036854775808 but only 9 bytes remain");
  }
  {
    GGUFBuilder b; // String value with a huge length.
    Bytes payload;
    payload.put<uint64_t>(~0ull >> 1).raw({'x'});
    b.addRaw("general.name", uint32_t(ValueType::String), payload.data);
    expectParseError(b, "key 'general.name' (entry at offset 24) string at "
                        "offset 48 has length 9223372036854775807 but only 1 bytes remain in the "
                        "file (57 bytes)");
  }
  for (ValueType elementType :
       {ValueType::UInt32, ValueType::String, ValueType::Array}) {
    GGUFBuilder b; // Arrays claiming 2^61 elements.
    Bytes payload;
    payload.put<uint32_t>(uint32_t(elementType)).put<uint64_t>(1ull << 61);
    payload.data.resize(payload.data.size() + 64, 0);
    b.addRaw("tokenizer.ggml.tokens", uint32_t(ValueType::Array), payload.data);
    expectParseError(b, "key 'tokenizer.ggml.tokens' (entry at offset 24) "
                        "array at offset 57 claims 2305843009213693952 " +
                            valueTypeName(elementType) + " elements");
  }
  {
    GGUFBuilder b;
    b.addRaw("weird", 13, {0, 0, 0, 0});
    expectParseError(b, "key 'weird' (entry at offset 24) has unknown value type 13");
  }
  {
    GGUFBuilder b;
    Bytes payload;
    payload.put<uint32_t>(42).put<uint64_t>(1).put<uint32_t>(0);
    b.addRaw("arr", uint32_t(ValueType::Array), payload.data);
    expectParseError(b, "has unknown element type 42");
  }
  {
    GGUFBuilder b; // Arrays nested 10 deep.
    Bytes payload;
    for (int i = 0; i < 10; ++i)
      payload.put<uint32_t>(uint32_t(ValueType::Array)).put<uint64_t>(1);
    payload.put<uint32_t>(uint32_t(ValueType::UInt8)).put<uint64_t>(0);
    b.addRaw("deep", uint32_t(ValueType::Array), payload.data);
    expectParseError(b, "nests deeper than 8 levels");
  }
  {
    GGUFBuilder b;
    b.addU32("dup", 1).addU32("dup", 2);
    expectParseError(b, "duplicate key 'dup'");
  }
  for (uint32_t alignment : {0u, 3u, 48u}) {
    GGUFBuilder b;
    b.addU32("general.alignment", alignment);
    expectParseError(b, "key 'general.alignment' is " +
                            std::to_string(alignment) +
                            ", expected a power of two");
  }
  {
    GGUFBuilder b;
    b.addString("general.alignment", "32");
    expectParseError(b, "key 'general.alignment' has type string, expected uint32");
  }
}

TEST(GGUFDamaged, TensorErrors) {
  const auto f32 = [](size_t n) { return std::vector<uint8_t>(n * 4, 0); };
  {
    GGUFBuilder b;
    b.addTensor("blk.3.attn_q.weight", code(GGMLType::F32), {8}, f32(8),
                /*offsetOverride=*/1 << 20);
    expectParseError(b, "tensor 'blk.3.attn_q.weight' data [offset 1048672, "
                        "32 bytes] runs past end of file (128 bytes)");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {8}, f32(8), int64_t(~0ull >> 1) & ~31ll);
    expectParseError(b, "runs past end of file");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {8}, f32(8), /*offsetOverride=*/4);
    expectParseError(b, "tensor 't' data offset 4 is not a multiple of the alignment 32");
  }
  {
    GGUFBuilder b;
    b.addTensor("a", code(GGMLType::F32), {16}, f32(16));
    b.addTensor("b", code(GGMLType::F32), {8}, f32(8), /*offsetOverride=*/32);
    expectParseError(b, "tensor 'b' data [offset 128, 32 bytes] overlaps tensor 'a'");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {1ull << 32, 1ull << 32, 1ull << 32},
                f32(1));
    expectParseError(b, "tensor 't' (info at offset 24) element count of its "
                        "shape overflows int64");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {1ull << 62, 1}, f32(1));
    expectParseError(b, "byte size of shape [4611686018427387904, 1] F32 "
                        "overflows 64 bits");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {4, 0}, f32(1));
    expectParseError(b, "tensor 't' (info at offset 24) dimension 1 is 0");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {1ull << 63}, f32(1));
    expectParseError(b, "dimension 0 is 9223372036854775808");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {1, 1, 1, 1, 1}, f32(1));
    expectParseError(b, "has 5 dimensions, at most 4 are supported");
  }
  for (uint32_t type : {4u, 99u}) {
    GGUFBuilder b;
    b.addTensor("t", type, {32}, f32(8));
    expectParseError(b, "tensor 't' (info at offset 24) has unknown tensor type " +
                            std::to_string(type));
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::Q4_0), {48}, std::vector<uint8_t>(27));
    expectParseError(b, "row length 48 is not a multiple of the Q4_0 block size 32");
  }
  {
    GGUFBuilder b;
    b.addTensor("t", code(GGMLType::F32), {1}, f32(1));
    b.addTensor("t", code(GGMLType::F32), {1}, f32(1));
    expectParseError(b, "duplicate tensor name 't'");
  }
  {
    Bytes b; // Huge tensor name length.
    b.raw({'G', 'G', 'U', 'F'}).put<uint32_t>(3).put<uint64_t>(1).put<uint64_t>(0);
    b.put<uint64_t>(1ull << 50);
    b.data.resize(b.data.size() + 40, 'a');
    expectParseError(b.data, "tensor #0 name at offset 24 has length 1125899906842624");
  }
}

TEST(GGUFDamaged, OpenErrors) {
  Result<GGUFFile> missing = GGUFFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message().rfind("/nonexistent/dir/model.gguf: cannot open", 0), 0u)
      << missing.message();
  Result<GGUFFile> dir = GGUFFile::open(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("not a regular file"), std::string::npos);
  const TempPath empty("empty.gguf");
  writeFile(empty, "", 0);
  Result<GGUFFile> e = GGUFFile::open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("file is 0 bytes"), std::string::npos);
}

TEST(GGUFFile, OpenByPathAndMove) {
  const std::vector<uint8_t> bytes = smallValidFile();
  const TempPath path("small.gguf");
  writeFile(path, bytes.data(), bytes.size());
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  GGUFFile moved = f.take();
  GGUFFile again = std::move(moved);
  EXPECT_EQ(*again.getString("str"), "hello");
  EXPECT_EQ(*again.readTensorF32("t.f32"), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(again.fileSize(), bytes.size());
}

//===----------------------------------------------------------------------===//
// The real model
//===----------------------------------------------------------------------===//

TEST(GGUFRealModel, ArchitectureMetadata) {
  const std::string path = modelPath();
  if (path.empty())
    GTEST_SKIP() << modelSkipMessage();
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->getString("general.architecture"), "llama");
  EXPECT_EQ(*f->getU32("llama.block_count"), 30u);
  EXPECT_EQ(*f->getU32("llama.embedding_length"), 576u);
  EXPECT_EQ(*f->getU32("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(*f->getU32("llama.attention.head_count"), 9u);
  EXPECT_EQ(*f->getU32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(*f->getU32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(*f->getF32("llama.rope.freq_base"), 100000.f);
  EXPECT_NEAR(*f->getF32("llama.attention.layer_norm_rms_epsilon"), 1e-5f, 1e-9f);
  EXPECT_EQ(*f->getString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->getString("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(f->getStringArray("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f->tensors().size(), 272u);

  const TensorInfo *embd = f->findTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GGMLType::Q8_0);
  EXPECT_EQ(embd->shapeString(), "[576, 49152]");
  EXPECT_EQ(embd->numRows(), 49152);
  const TensorInfo *q = f->findTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, GGMLType::Q4_1);
  EXPECT_EQ(q->shapeString(), "[576, 576]");
  EXPECT_EQ(f->findTensor("blk.29.attn_k.weight")->shapeString(), "[576, 192]");

  // Every tensor decodes to finite values.
  for (const TensorInfo &t : f->tensors()) {
    Result<std::vector<float>> data = f->readTensorF32(t.name);
    ASSERT_TRUE(data.ok()) << data.message();
    for (float v : *data)
      ASSERT_TRUE(std::isfinite(v)) << t.name;
  }
}

TEST(GGUFRealModel, DequantMatchesPythonReference) {
  const std::string path = modelPath();
  if (path.empty())
    GTEST_SKIP() << modelSkipMessage();
  if (!referenceAvailable())
    GTEST_SKIP() << referenceSkipMessage();
  const TempPath out("model_rows.f32");
  std::string log;
  ASSERT_EQ(runReference("dequant " + shellQuote(path) + " --out " +
                             shellQuote(out) +
                             " --tensor token_embd.weight:0:3"
                             " --tensor token_embd.weight:30000:2"
                             " --tensor token_embd.weight:49150:2"
                             " --tensor blk.0.attn_q.weight"
                             " --tensor blk.0.attn_norm.weight"
                             " --tensor blk.29.ffn_down.weight",
                         log),
            0)
      << log;
  Result<GGUFFile> f = GGUFFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  const std::string raw = readFile(out);
  const nlohmann::json manifest =
      nlohmann::json::parse(readFile(out.str() + ".json"));
  ASSERT_EQ(manifest["tensors"].size(), 6u);
  for (const auto &entry : manifest["tensors"]) {
    const std::string name = entry["name"];
    const int64_t firstRow = entry["first_row"], numRows = entry["num_rows"];
    SCOPED_TRACE(name + " rows " + std::to_string(firstRow));
    const TensorInfo *info = f->findTensor(name);
    ASSERT_NE(info, nullptr);
    std::vector<float> mine(size_t(numRows * info->rowLength()));
    ASSERT_TRUE(f->dequantizeRows(*info, firstRow, numRows, mine.data()).ok());
    const size_t offset = entry["offset"];
    ASSERT_EQ(size_t(entry["count"]), mine.size());
    ASSERT_LE((offset + mine.size()) * 4, raw.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      float theirs;
      std::memcpy(&theirs, raw.data() + (offset + i) * 4, 4);
      ASSERT_TRUE(std::isfinite(mine[i]));
      ASSERT_TRUE(sameFloat(mine[i], theirs)) << "element " << i;
    }
  }
}
