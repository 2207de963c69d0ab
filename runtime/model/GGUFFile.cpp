//===- GGUFFile.cpp - Typed metadata lookups and tensor data access -------===//
//
// GGUFFile's accessors over a parsed file: metadata by key with errors that
// name the key and the type found, and tensors by name, dequantised to f32.
//
//===----------------------------------------------------------------------===//

#include "GGUFInternal.h"

#include <limits>
#include <stdexcept>

namespace condensate::model {

using namespace detail;

//===----------------------------------------------------------------------===//
// Metadata
//===----------------------------------------------------------------------===//

const Value *GGUFFile::find(std::string_view key) const {
  auto it = keyIndex_.find(key);
  return it == keyIndex_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

/// Looks `key` up, or explains that it is missing.
Result<const Value *> lookup(const GGUFFile &file, std::string_view key) {
  if (const Value *v = file.find(key))
    return v;
  return Status::error(file.name() + ": missing key " + quoted(key));
}

Status typeMismatch(const GGUFFile &file, std::string_view key,
                    const Value &v, const char *expected) {
  std::string actual = valueTypeName(v.type());
  if (v.isArray())
    actual = "array of " + valueTypeName(v.elementType());
  return Status::error(file.name() + ": key " + quoted(key) + " has type " +
                       actual + ", expected " + expected);
}

/// Integer value of `v` within [lo, hi], with key-naming errors.
template <typename T>
Result<T> integerIn(const GGUFFile &file, std::string_view key, const Value &v,
                    const char *typeName, const std::string &where) {
  if (!v.isInteger())
    return typeMismatch(file, key, v, typeName);
  int64_t s = 0;
  uint64_t u = 0;
  if (std::numeric_limits<T>::is_signed) {
    if (v.asInt64(s) && s >= int64_t(std::numeric_limits<T>::min()) &&
        s <= int64_t(std::numeric_limits<T>::max()))
      return T(s);
  } else if (v.asUInt64(u) && u <= uint64_t(std::numeric_limits<T>::max())) {
    return T(u);
  }
  return Status::error(file.name() + ": key " + quoted(key) + where +
                       " value " + v.toString() + " does not fit " + typeName);
}

template <typename T>
Result<T> getInteger(const GGUFFile &file, std::string_view key,
                     const char *typeName) {
  Result<const Value *> v = lookup(file, key);
  if (!v)
    return v.status();
  return integerIn<T>(file, key, **v, typeName, "");
}

Result<double> getFloat(const GGUFFile &file, std::string_view key,
                        const char *typeName) {
  Result<const Value *> v = lookup(file, key);
  if (!v)
    return v.status();
  double d = 0;
  if (!(*v)->asDouble(d))
    return typeMismatch(file, key, **v, typeName);
  return d;
}

template <typename T>
Result<std::vector<T>> getIntegerArray(const GGUFFile &file,
                                       std::string_view key,
                                       const char *typeName) {
  Result<const Value *> v = lookup(file, key);
  if (!v)
    return v.status();
  const Value &array = **v;
  std::string expected = std::string("array of ") + typeName;
  if (!array.isArray())
    return typeMismatch(file, key, array, expected.c_str());
  std::vector<T> out;
  out.reserve(size_t(array.size()));
  for (uint64_t i = 0; i < array.size(); ++i) {
    Value e = array.element(i);
    if (!e.isInteger())
      return typeMismatch(file, key, array, expected.c_str());
    Result<T> r = integerIn<T>(file, key, e, typeName,
                               " element " + std::to_string(i));
    if (!r)
      return r.status();
    out.push_back(*r);
  }
  return out;
}

} // namespace

Result<uint32_t> GGUFFile::getU32(std::string_view key) const {
  return getInteger<uint32_t>(*this, key, "uint32");
}
Result<int32_t> GGUFFile::getI32(std::string_view key) const {
  return getInteger<int32_t>(*this, key, "int32");
}
Result<uint64_t> GGUFFile::getU64(std::string_view key) const {
  return getInteger<uint64_t>(*this, key, "uint64");
}
Result<int64_t> GGUFFile::getI64(std::string_view key) const {
  return getInteger<int64_t>(*this, key, "int64");
}

Result<float> GGUFFile::getF32(std::string_view key) const {
  Result<double> d = getFloat(*this, key, "float32");
  if (!d)
    return d.status();
  return float(*d);
}

Result<double> GGUFFile::getF64(std::string_view key) const {
  return getFloat(*this, key, "float64");
}

Result<bool> GGUFFile::getBool(std::string_view key) const {
  Result<const Value *> v = lookup(*this, key);
  if (!v)
    return v.status();
  bool b = false;
  if (!(*v)->asBool(b))
    return typeMismatch(*this, key, **v, "bool");
  return b;
}

Result<std::string> GGUFFile::getString(std::string_view key) const {
  Result<const Value *> v = lookup(*this, key);
  if (!v)
    return v.status();
  if ((*v)->type() != ValueType::String)
    return typeMismatch(*this, key, **v, "string");
  return std::string((*v)->asString());
}

Result<const Value *> GGUFFile::getArray(std::string_view key) const {
  Result<const Value *> v = lookup(*this, key);
  if (!v)
    return v.status();
  if (!(*v)->isArray())
    return typeMismatch(*this, key, **v, "array");
  return *v;
}

Result<std::vector<std::string>>
GGUFFile::getStringArray(std::string_view key) const {
  Result<const Value *> v = lookup(*this, key);
  if (!v)
    return v.status();
  const Value &array = **v;
  if (!array.isArray() || array.elementType() != ValueType::String)
    return typeMismatch(*this, key, array, "array of string");
  std::vector<std::string> out;
  out.reserve(size_t(array.size()));
  for (uint64_t i = 0; i < array.size(); ++i)
    out.emplace_back(array.element(i).asString());
  return out;
}

Result<std::vector<int32_t>>
GGUFFile::getI32Array(std::string_view key) const {
  return getIntegerArray<int32_t>(*this, key, "int32");
}

Result<std::vector<int64_t>>
GGUFFile::getI64Array(std::string_view key) const {
  return getIntegerArray<int64_t>(*this, key, "int64");
}

Result<std::vector<float>>
GGUFFile::getF32Array(std::string_view key) const {
  Result<const Value *> v = lookup(*this, key);
  if (!v)
    return v.status();
  const Value &array = **v;
  if (!array.isArray() || (array.elementType() != ValueType::Float32 &&
                           array.elementType() != ValueType::Float64))
    return typeMismatch(*this, key, array, "array of float32");
  std::vector<float> out;
  out.reserve(size_t(array.size()));
  for (uint64_t i = 0; i < array.size(); ++i) {
    double d = 0;
    array.element(i).asDouble(d);
    out.push_back(float(d));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

const TensorInfo *GGUFFile::findTensor(std::string_view name) const {
  auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

Result<const TensorInfo *> GGUFFile::getTensor(std::string_view name) const {
  if (const TensorInfo *info = findTensor(name))
    return info;
  return Status::error(name_ + ": no tensor named " + quoted(name));
}

Status GGUFFile::dequantizeRows(const TensorInfo &info, int64_t firstRow,
                                int64_t numRows, float *out) const {
  const std::string where = name_ + ": tensor " + quoted(info.name);
  uint64_t end = 0;
  if (info.ne[0] <= 0 ||
      addOverflows(info.fileOffset, info.numBytes, end) || end > size_)
    return Status::error(where + " does not describe data inside this file");
  const int64_t totalRows = info.numRows();
  if (firstRow < 0 || numRows < 0 || firstRow > totalRows ||
      numRows > totalRows - firstRow)
    return Status::error(where + ": rows [" + std::to_string(firstRow) +
                         ", +" + std::to_string(numRows) +
                         ") out of range (" + std::to_string(totalRows) +
                         " rows)");
  const uint64_t offset = uint64_t(firstRow) * info.rowBytes;
  return dequantize(info.type, tensorData(info) + offset,
                    size_t(uint64_t(numRows) * info.rowBytes),
                    numRows * info.ne[0], out)
      .withContext(where);
}

Result<std::vector<float>>
GGUFFile::readTensorF32(std::string_view name) const {
  Result<const TensorInfo *> info = getTensor(name);
  if (!info)
    return info.status();
  std::vector<float> out;
  try {
    out.resize(size_t((*info)->numElements));
  } catch (const std::exception &) {
    return Status::error(name_ + ": tensor " + quoted(name) +
                         ": out of memory for " +
                         std::to_string((*info)->numElements) + " floats");
  }
  CONDENSATE_RETURN_IF_ERROR(
      dequantizeRows(**info, 0, (*info)->numRows(), out.data()));
  return out;
}


} // namespace condensate::model
