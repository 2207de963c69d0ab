//===- GGUFValue.cpp - GGUF metadata values and tensor shapes -------------===//
//
// How GGUF encodes scalar values, and Value's typed views of them (integers
// range-checked, arrays read element by element from the mapped file).
//
//===----------------------------------------------------------------------===//

#include "GGUFInternal.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace condensate::model {

namespace detail {

uint64_t scalarBytes(ValueType type) {
  switch (type) {
  case ValueType::UInt8:
  case ValueType::Int8:
  case ValueType::Bool:
    return 1;
  case ValueType::UInt16:
  case ValueType::Int16:
    return 2;
  case ValueType::UInt32:
  case ValueType::Int32:
  case ValueType::Float32:
    return 4;
  case ValueType::UInt64:
  case ValueType::Int64:
  case ValueType::Float64:
    return 8;
  default:
    return 0;
  }
}

uint64_t loadScalarBits(ValueType type, const uint8_t *p) {
  switch (type) {
  case ValueType::UInt8:
  case ValueType::Bool:
    return p[0];
  case ValueType::Int8:
    return uint64_t(int64_t(int8_t(p[0])));
  case ValueType::UInt16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case ValueType::Int16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return uint64_t(int64_t(v));
  }
  case ValueType::UInt32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case ValueType::Int32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return uint64_t(int64_t(v));
  }
  case ValueType::Float32: {
    float f;
    std::memcpy(&f, p, 4);
    double d = f;
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    return bits;
  }
  case ValueType::UInt64:
  case ValueType::Int64:
  case ValueType::Float64: {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    return 0;
  }
}

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F || c == '\'' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "'";
}

} // namespace detail

using namespace detail;

namespace {

bool isSignedType(ValueType type) {
  return type == ValueType::Int8 || type == ValueType::Int16 ||
         type == ValueType::Int32 || type == ValueType::Int64;
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

} // namespace

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

std::string valueTypeName(ValueType type) {
  switch (type) {
  case ValueType::UInt8:
    return "uint8";
  case ValueType::Int8:
    return "int8";
  case ValueType::UInt16:
    return "uint16";
  case ValueType::Int16:
    return "int16";
  case ValueType::UInt32:
    return "uint32";
  case ValueType::Int32:
    return "int32";
  case ValueType::Float32:
    return "float32";
  case ValueType::Bool:
    return "bool";
  case ValueType::String:
    return "string";
  case ValueType::Array:
    return "array";
  case ValueType::UInt64:
    return "uint64";
  case ValueType::Int64:
    return "int64";
  case ValueType::Float64:
    return "float64";
  }
  return "type" + std::to_string(static_cast<uint32_t>(type));
}

bool Value::isInteger() const {
  switch (type_) {
  case ValueType::UInt8:
  case ValueType::Int8:
  case ValueType::UInt16:
  case ValueType::Int16:
  case ValueType::UInt32:
  case ValueType::Int32:
  case ValueType::UInt64:
  case ValueType::Int64:
    return true;
  default:
    return false;
  }
}

bool Value::asInt64(int64_t &out) const {
  if (!isInteger())
    return false;
  if (!isSignedType(type_) &&
      bits_ > uint64_t(std::numeric_limits<int64_t>::max()))
    return false;
  out = int64_t(bits_);
  return true;
}

bool Value::asUInt64(uint64_t &out) const {
  if (!isInteger())
    return false;
  if (isSignedType(type_) && int64_t(bits_) < 0)
    return false;
  out = bits_;
  return true;
}

bool Value::asDouble(double &out) const {
  if (!isFloat())
    return false;
  std::memcpy(&out, &bits_, 8);
  return true;
}

bool Value::asBool(bool &out) const {
  if (type_ != ValueType::Bool)
    return false;
  out = bits_ != 0;
  return true;
}

Value Value::element(uint64_t index) const {
  if (type_ != ValueType::Array || index >= count_)
    return Value();
  if (elementType_ == ValueType::String) {
    Value v;
    v.type_ = ValueType::String;
    v.string_ = strings_[index];
    return v;
  }
  if (elementType_ == ValueType::Array)
    return arrays_[index];
  Value v;
  v.type_ = elementType_;
  v.bits_ = loadScalarBits(elementType_,
                           elements_ + index * scalarBytes(elementType_));
  return v;
}

std::string Value::toString(size_t maxItems) const {
  switch (type_) {
  case ValueType::String:
    return quoted(string_);
  case ValueType::Bool:
    return bits_ ? "true" : "false";
  case ValueType::Float32:
  case ValueType::Float64: {
    double d = 0;
    asDouble(d);
    return formatDouble(d);
  }
  case ValueType::Array: {
    std::string out = valueTypeName(elementType_) + "[" + u64(count_) + "] [";
    for (uint64_t i = 0; i < count_ && i < maxItems; ++i)
      out += (i ? ", " : "") + element(i).toString(maxItems);
    if (count_ > maxItems)
      out += ", ...";
    return out + "]";
  }
  default:
    if (isSignedType(type_))
      return std::to_string(int64_t(bits_));
    return std::to_string(bits_);
  }
}

//===----------------------------------------------------------------------===//
// TensorInfo
//===----------------------------------------------------------------------===//

std::string TensorInfo::shapeString() const {
  std::string out = "[";
  for (uint32_t i = 0; i < std::max<uint32_t>(numDims, 1); ++i)
    out += (i ? ", " : "") + std::to_string(ne[i]);
  return out + "]";
}

} // namespace condensate::model
