//===- GGUF.h - Read GGUF model files and dequantise their tensors --------===//
//
// A GGUF v2/v3 reader: the file is memory-mapped read-only (or taken from an
// in-memory buffer), every count, length and offset is checked against the
// file size before anything is allocated or read, and tensors are decoded to
// float32 on request. Metadata values and tensor data point into the mapping,
// so they stay valid exactly as long as the GGUFFile that produced them.
//
// Tensor dimensions follow GGUF/ggml order: ne[0] is the contiguous dimension
// (the row length), ne[1..3] the outer ones. A "row" is ne[0] elements.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_MODEL_GGUF_H
#define CONDENSATE_MODEL_GGUF_H

#include "condensate/Support/Status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace condensate::model {

//===----------------------------------------------------------------------===//
// Tensor element types
//===----------------------------------------------------------------------===//

/// ggml tensor types by their on-disk code (ggml.h `enum ggml_type`).
enum class GGMLType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

/// Block geometry of a ggml type: `blockSize` elements take `blockBytes`.
struct GGMLTypeTraits {
  GGMLType type;
  const char *name;
  int64_t blockSize;
  int64_t blockBytes;
  /// Whether dequantize() can decode it (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1
  /// Q8_0 Q4_K Q5_K Q6_K).
  bool dequantizable;
};

/// Traits of the type with on-disk code `code`, or nullptr if unknown.
const GGMLTypeTraits *ggmlTypeTraits(uint32_t code);
/// Name such as "Q4_K"; "type<N>" for an unknown code.
std::string ggmlTypeName(uint32_t code);
inline std::string ggmlTypeName(GGMLType type) {
  return ggmlTypeName(static_cast<uint32_t>(type));
}

/// Decodes `numElements` values of `type` stored in `src` (`srcBytes` long) to
/// float32. `numElements` must be a whole number of blocks and `srcBytes` at
/// least the bytes they take. Errors name the type and the sizes.
Status dequantize(GGMLType type, const void *src, size_t srcBytes,
                  int64_t numElements, float *out);

/// Whether dotRows() takes `type`: the types dequantize() decodes.
bool dotRowsSupported(GGMLType type);

/// Whether dotRows() has a kernel for `type` on this CPU (it then reads
/// the blocks in place, faster than a float32 product over the decoded
/// rows); else it decodes the rows through dequantize() first.
bool dotRowsFast(GGMLType type);

/// sums[i] = x[32 i] + ... + x[32 i + 31] for the n / 32 runs of `n` (a
/// multiple of 32) elements: what dotRows() needs of its float32 row.
void blockSums(const float *x, int64_t n, float *sums);

/// out[r] = sum_c W[r, c] x[c] for `rows` rows of a matrix held as `type`
/// blocks (dotRowsSupported), row r at src + r * rowBytes with `cols`
/// elements (a whole number of blocks), without decoding the rows to
/// float32 where a kernel for the type exists (AVX2 + FMA: Q4_0 Q4_1
/// Q5_0 Q8_0 Q4_K Q6_K; else through dequantize()). `xSums` is
/// blockSums(x, cols). Agrees with dequantize() and a float32 dot product
/// to float32 rounding of sum |W x|, not bit for bit. Unchecked: the
/// caller validated the type and the sizes.
void dotRows(GGMLType type, const uint8_t *src, size_t rowBytes, int64_t rows,
             int64_t cols, const float *x, const float *xSums, float *out);

//===----------------------------------------------------------------------===//
// Metadata values
//===----------------------------------------------------------------------===//

/// GGUF metadata value types by their on-disk code.
enum class ValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

/// "uint32", "string", "array", ...; "type<N>" for an unknown code.
std::string valueTypeName(ValueType type);

/// One metadata value. Strings and numeric arrays are views into the file.
class Value {
public:
  ValueType type() const { return type_; }
  bool isInteger() const;
  bool isFloat() const {
    return type_ == ValueType::Float32 || type_ == ValueType::Float64;
  }
  bool isArray() const { return type_ == ValueType::Array; }

  /// Integer value if this is an integer type that fits the result type.
  bool asInt64(int64_t &out) const;
  bool asUInt64(uint64_t &out) const;
  /// Float32/Float64 value.
  bool asDouble(double &out) const;
  /// Bool value.
  bool asBool(bool &out) const;
  /// String contents (empty for non-strings).
  std::string_view asString() const { return string_; }

  /// Element type and length of an array (meaningless for scalars).
  ValueType elementType() const { return elementType_; }
  uint64_t size() const { return count_; }
  /// Element `index` of an array as a standalone Value (index < size()).
  Value element(uint64_t index) const;

  /// Human-readable rendering; arrays show at most `maxItems` elements.
  std::string toString(size_t maxItems = 8) const;

private:
  friend class GGUFParser;
  ValueType type_ = ValueType::UInt8;
  uint64_t bits_ = 0;          // Scalar payload, see GGUF.cpp.
  std::string_view string_;    // String value.
  ValueType elementType_ = ValueType::UInt8;
  uint64_t count_ = 0;
  const uint8_t *elements_ = nullptr;      // Fixed-size scalar elements.
  std::vector<std::string_view> strings_;  // String elements.
  std::vector<Value> arrays_;              // Array elements.
};

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

struct TensorInfo {
  std::string name;
  GGMLType type = GGMLType::F32;
  uint32_t numDims = 0;
  /// Dimensions in GGUF order; unused trailing ones are 1.
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  /// Offset from the start of the data section, as stored in the file.
  uint64_t offset = 0;
  /// Absolute offset in the file.
  uint64_t fileOffset = 0;
  uint64_t numBytes = 0;
  int64_t numElements = 0;
  uint64_t rowBytes = 0;

  int64_t rowLength() const { return ne[0]; }
  int64_t numRows() const { return numElements / ne[0]; }
  /// "[576, 49152]" style shape string.
  std::string shapeString() const;
};

//===----------------------------------------------------------------------===//
// The file
//===----------------------------------------------------------------------===//

class GGUFFile {
public:
  /// Maps and parses the file at `path`; error messages start with `path`.
  static Result<GGUFFile> open(const std::string &path);
  /// Parses a copy of a file held in memory; `name` prefixes error messages.
  static Result<GGUFFile> fromBuffer(std::vector<uint8_t> bytes,
                                     std::string name = "<memory>");

  GGUFFile(GGUFFile &&) noexcept;
  GGUFFile &operator=(GGUFFile &&) noexcept;
  GGUFFile(const GGUFFile &) = delete;
  GGUFFile &operator=(const GGUFFile &) = delete;
  ~GGUFFile();

  const std::string &name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t fileSize() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  /// Absolute offset of the (aligned) tensor data section.
  uint64_t dataOffset() const { return dataOffset_; }

  // Metadata ---------------------------------------------------------------

  /// All key/value pairs in file order (for `--dump` style listings).
  const std::vector<std::pair<std::string, Value>> &metadata() const {
    return metadata_;
  }
  /// The value of `key`, or nullptr.
  const Value *find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. Integer getters accept any integer type whose value fits
  // ("key 'k' value -1 does not fit uint32"); float getters accept float32 and
  // float64. Other mismatches: "key 'k' has type string, expected uint32".
  Result<uint32_t> getU32(std::string_view key) const;
  Result<int32_t> getI32(std::string_view key) const;
  Result<uint64_t> getU64(std::string_view key) const;
  Result<int64_t> getI64(std::string_view key) const;
  Result<float> getF32(std::string_view key) const;
  Result<double> getF64(std::string_view key) const;
  Result<bool> getBool(std::string_view key) const;
  Result<std::string> getString(std::string_view key) const;
  /// The array value itself (any element type).
  Result<const Value *> getArray(std::string_view key) const;
  Result<std::vector<std::string>> getStringArray(std::string_view key) const;
  /// Array of integers that each fit int32 / int64.
  Result<std::vector<int32_t>> getI32Array(std::string_view key) const;
  Result<std::vector<int64_t>> getI64Array(std::string_view key) const;
  Result<std::vector<float>> getF32Array(std::string_view key) const;

  // Tensors ----------------------------------------------------------------

  /// Tensor infos in file order.
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const TensorInfo *findTensor(std::string_view name) const;
  /// Like findTensor, with "no tensor named 'x'" as the error.
  Result<const TensorInfo *> getTensor(std::string_view name) const;
  /// Raw bytes of a tensor (numBytes long; checked to lie inside the file).
  const uint8_t *tensorData(const TensorInfo &info) const {
    return base_ + info.fileOffset;
  }

  /// Decodes rows [firstRow, firstRow + numRows) of `info` to float32 into
  /// `out` (numRows * rowLength() floats).
  Status dequantizeRows(const TensorInfo &info, int64_t firstRow,
                        int64_t numRows, float *out) const;
  /// The whole tensor as float32, GGUF element order.
  Result<std::vector<float>> readTensorF32(std::string_view name) const;

private:
  friend class GGUFParser;
  struct Mapping;
  GGUFFile() = default;

  std::string name_;
  std::unique_ptr<Mapping> mapping_;  // mmap'ed file, if opened by path.
  std::vector<uint8_t> buffer_;       // Owned bytes, if parsed from memory.
  const uint8_t *base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t dataOffset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
  // Lookup by name; the views point into the file bytes.
  std::unordered_map<std::string_view, size_t> keyIndex_;
  std::unordered_map<std::string_view, size_t> tensorIndex_;
};

} // namespace condensate::model

#endif // CONDENSATE_MODEL_GGUF_H
