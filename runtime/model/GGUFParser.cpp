//===- GGUFParser.cpp - Reading and validating a GGUF container -----------===//
//
// Opens a GGUF file (mapped read-only) or buffer and parses its header,
// metadata and tensor infos, then places every tensor in the data section.
// Parsing never trusts a count: before anything is read or allocated, the
// bytes it needs are checked against what is left of the file, and tensor
// sizes are computed with overflow-checked arithmetic.
//
//===----------------------------------------------------------------------===//

#include "GGUFInternal.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace condensate::model {

using namespace detail;

namespace {

constexpr uint64_t kHeaderBytes = 24;       // magic, version, two counts.
constexpr uint64_t kMinKeyValueBytes = 13;  // key length, type, 1-byte value.
constexpr uint64_t kMinTensorInfoBytes = 24; // name length, n_dims, type, offset.
constexpr uint64_t kMinStringBytes = 8;      // length prefix.
constexpr uint64_t kMinArrayBytes = 12;      // element type, count.
constexpr unsigned kMaxArrayDepth = 8;       // Nested arrays (bounds recursion).
constexpr uint32_t kMaxDims = 4;

bool isKnownValueType(uint32_t code) { return code <= 12; }

} // namespace

//===----------------------------------------------------------------------===//
// Mapping
//===----------------------------------------------------------------------===//

/// A read-only private mapping of a whole file; unmapped on destruction.
struct GGUFFile::Mapping {
  void *address = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (address)
      ::munmap(address, length);
  }
};

GGUFFile::GGUFFile(GGUFFile &&) noexcept = default;
GGUFFile &GGUFFile::operator=(GGUFFile &&) noexcept = default;
GGUFFile::~GGUFFile() = default;

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class GGUFParser {
public:
  explicit GGUFParser(GGUFFile &file)
      : file_(file), base_(file.base_), size_(file.size_) {}

  Status parse();

private:
  Status error(const std::string &what) const {
    return Status::error(file_.name_ + ": " + what);
  }
  uint64_t remaining() const { return size_ - pos_; }
  Status truncated(const std::string &what, uint64_t offset,
                   uint64_t need) const {
    return error(what + " at offset " + u64(offset) + " needs " + u64(need) +
                 " bytes, runs past end of file (" + u64(size_) + " bytes)");
  }
  Status readBytes(void *out, uint64_t n, const std::string &what) {
    if (remaining() < n)
      return truncated(what, pos_, n);
    std::memcpy(out, base_ + pos_, n);
    pos_ += n;
    return Status::success();
  }
  Status readU32(uint32_t &v, const std::string &what) {
    return readBytes(&v, 4, what);
  }
  Status readU64(uint64_t &v, const std::string &what) {
    return readBytes(&v, 8, what);
  }
  Status readString(std::string_view &out, const std::string &what);
  Status readValue(ValueType type, Value &out, const std::string &what,
                   unsigned depth);
  Status parseTensorInfo(uint64_t index, TensorInfo &info,
                         std::string_view &name);
  Status readAlignment();
  Status placeTensors();

  GGUFFile &file_;
  const uint8_t *base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Status GGUFParser::readString(std::string_view &out, const std::string &what) {
  const uint64_t start = pos_;
  uint64_t length = 0;
  CONDENSATE_RETURN_IF_ERROR(readU64(length, what + " length"));
  if (length > remaining())
    return error(what + " at offset " + u64(start) + " has length " +
                 u64(length) + " but only " + u64(remaining()) +
                 " bytes remain in the file (" + u64(size_) + " bytes)");
  out = std::string_view(reinterpret_cast<const char *>(base_ + pos_),
                         size_t(length));
  pos_ += length;
  return Status::success();
}

Status GGUFParser::readValue(ValueType type, Value &out,
                             const std::string &what, unsigned depth) {
  out.type_ = type;
  if (uint64_t n = scalarBytes(type)) {
    if (remaining() < n)
      return truncated(what + " " + valueTypeName(type) + " value", pos_, n);
    out.bits_ = loadScalarBits(type, base_ + pos_);
    pos_ += n;
    return Status::success();
  }
  if (type == ValueType::String)
    return readString(out.string_, what + " string");
  if (type != ValueType::Array)
    return error(what + " has unknown value type " +
                 u64(static_cast<uint32_t>(type)) + " at offset " +
                 u64(pos_ - 4));

  const uint64_t start = pos_;
  uint32_t elementCode = 0;
  uint64_t count = 0;
  CONDENSATE_RETURN_IF_ERROR(readU32(elementCode, what + " array type"));
  if (!isKnownValueType(elementCode))
    return error(what + " array at offset " + u64(start) +
                 " has unknown element type " + u64(elementCode));
  CONDENSATE_RETURN_IF_ERROR(readU64(count, what + " array length"));
  const auto elementType = static_cast<ValueType>(elementCode);
  out.elementType_ = elementType;
  out.count_ = count;

  // The smallest possible encoding of one element bounds the count.
  uint64_t minElementBytes = scalarBytes(elementType);
  if (elementType == ValueType::String)
    minElementBytes = kMinStringBytes;
  else if (elementType == ValueType::Array)
    minElementBytes = kMinArrayBytes;
  if (count > remaining() / minElementBytes)
    return error(what + " array at offset " + u64(start) + " claims " +
                 u64(count) + " " + valueTypeName(elementType) +
                 " elements (at least " + u64(minElementBytes) +
                 " bytes each) but only " + u64(remaining()) +
                 " bytes remain in the file (" + u64(size_) + " bytes)");

  if (uint64_t n = scalarBytes(elementType)) {
    out.elements_ = base_ + pos_;
    pos_ += count * n;
    return Status::success();
  }
  if (elementType == ValueType::String) {
    out.strings_.resize(size_t(count));
    for (uint64_t i = 0; i < count; ++i)
      CONDENSATE_RETURN_IF_ERROR(
          readString(out.strings_[i], what + " element " + u64(i)));
    return Status::success();
  }
  if (depth >= kMaxArrayDepth)
    return error(what + " array at offset " + u64(start) + " nests deeper than " +
                 u64(kMaxArrayDepth) + " levels");
  out.arrays_.resize(size_t(count));
  for (uint64_t i = 0; i < count; ++i)
    CONDENSATE_RETURN_IF_ERROR(readValue(ValueType::Array, out.arrays_[i],
                                         what + " element " + u64(i),
                                         depth + 1));
  return Status::success();
}

Status GGUFParser::parseTensorInfo(uint64_t index, TensorInfo &info,
                                   std::string_view &name) {
  const uint64_t start = pos_;
  const std::string which = "tensor #" + u64(index);
  CONDENSATE_RETURN_IF_ERROR(readString(name, which + " name"));
  info.name = std::string(name);
  const std::string where =
      "tensor " + quoted(name) + " (info at offset " + u64(start) + ")";

  CONDENSATE_RETURN_IF_ERROR(readU32(info.numDims, where + " dimension count"));
  if (info.numDims > kMaxDims)
    return error(where + " has " + u64(info.numDims) +
                 " dimensions, at most " + u64(kMaxDims) + " are supported");
  uint64_t elements = 1;
  for (uint32_t d = 0; d < info.numDims; ++d) {
    uint64_t dim = 0;
    CONDENSATE_RETURN_IF_ERROR(readU64(dim, where + " dimension " + u64(d)));
    if (dim == 0 || dim > uint64_t(std::numeric_limits<int64_t>::max()))
      return error(where + " dimension " + u64(d) + " is " + u64(dim) +
                   ", expected 1 .. 2^63-1");
    if (mulOverflows(elements, dim, elements) ||
        elements > uint64_t(std::numeric_limits<int64_t>::max()))
      return error(where + " element count of its shape overflows int64");
    info.ne[d] = int64_t(dim);
  }
  info.numElements = int64_t(elements);

  uint32_t typeCode = 0;
  CONDENSATE_RETURN_IF_ERROR(readU32(typeCode, where + " type"));
  const GGMLTypeTraits *traits = ggmlTypeTraits(typeCode);
  if (!traits)
    return error(where + " has unknown tensor type " + u64(typeCode));
  info.type = traits->type;
  CONDENSATE_RETURN_IF_ERROR(readU64(info.offset, where + " data offset"));

  if (info.ne[0] % traits->blockSize != 0)
    return error(where + " row length " + std::to_string(info.ne[0]) +
                 " is not a multiple of the " + traits->name + " block size " +
                 std::to_string(traits->blockSize));
  const uint64_t blocksPerRow = uint64_t(info.ne[0] / traits->blockSize);
  if (mulOverflows(blocksPerRow, uint64_t(traits->blockBytes), info.rowBytes) ||
      mulOverflows(info.rowBytes, uint64_t(info.numRows()), info.numBytes))
    return error(where + " byte size of shape " + info.shapeString() + " " +
                 traits->name + " overflows 64 bits");
  return Status::success();
}

Status GGUFParser::readAlignment() {
  const Value *value = file_.find("general.alignment");
  if (!value)
    return Status::success();
  uint64_t alignment = 0;
  if (!value->asUInt64(alignment))
    return error("key 'general.alignment' has type " +
                 valueTypeName(value->type()) + ", expected uint32");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
      alignment > (uint64_t(1) << 31))
    return error("key 'general.alignment' is " + value->toString() +
                 ", expected a power of two no larger than 2^31");
  file_.alignment_ = alignment;
  return Status::success();
}

Status GGUFParser::placeTensors() {
  const uint64_t alignment = file_.alignment_;
  uint64_t dataOffset = 0;
  if (addOverflows(pos_, alignment - 1, dataOffset))
    return error("data section start overflows");
  dataOffset &= ~(alignment - 1);
  file_.dataOffset_ = dataOffset;

  std::vector<size_t> order(file_.tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    TensorInfo &info = file_.tensors_[i];
    order[i] = i;
    const std::string where = "tensor " + quoted(info.name);
    if (info.offset % alignment != 0)
      return error(where + " data offset " + u64(info.offset) +
                   " is not a multiple of the alignment " + u64(alignment));
    uint64_t end = 0;
    const bool startOverflows =
        addOverflows(dataOffset, info.offset, info.fileOffset);
    if (startOverflows || addOverflows(info.fileOffset, info.numBytes, end) ||
        end > size_)
      return error(where + " data [offset " +
                   (startOverflows ? u64(dataOffset) + "+" + u64(info.offset)
                                   : u64(info.fileOffset)) +
                   ", " + u64(info.numBytes) +
                   " bytes] runs past end of file (" + u64(size_) + " bytes)");
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return file_.tensors_[a].fileOffset < file_.tensors_[b].fileOffset;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo &prev = file_.tensors_[order[i - 1]];
    const TensorInfo &cur = file_.tensors_[order[i]];
    if (cur.fileOffset < prev.fileOffset + prev.numBytes)
      return error("tensor " + quoted(cur.name) + " data [offset " +
                   u64(cur.fileOffset) + ", " + u64(cur.numBytes) +
                   " bytes] overlaps tensor " + quoted(prev.name) +
                   " data [offset " + u64(prev.fileOffset) + ", " +
                   u64(prev.numBytes) + " bytes]");
  }
  return Status::success();
}

Status GGUFParser::parse() {
  if (size_ < kHeaderBytes)
    return error("file is " + u64(size_) +
                 " bytes, too small for a GGUF header (" + u64(kHeaderBytes) +
                 " bytes)");
  char magic[4];
  CONDENSATE_RETURN_IF_ERROR(readBytes(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%02X %02X %02X %02X",
                  uint8_t(magic[0]), uint8_t(magic[1]), uint8_t(magic[2]),
                  uint8_t(magic[3]));
    return error(std::string("bad magic bytes ") + buf +
                 " at offset 0, expected 'GGUF' (47 47 55 46)");
  }
  uint32_t version = 0;
  CONDENSATE_RETURN_IF_ERROR(readU32(version, "version"));
  if (version != 2 && version != 3) {
    if (version == 0x02000000u || version == 0x03000000u)
      return error("version at offset 4 is byte-swapped: big-endian GGUF "
                   "files are not supported");
    return error("unsupported GGUF version " + u64(version) +
                 " at offset 4, expected 2 or 3");
  }
  file_.version_ = version;

  uint64_t tensorCount = 0, kvCount = 0;
  CONDENSATE_RETURN_IF_ERROR(readU64(tensorCount, "tensor count"));
  CONDENSATE_RETURN_IF_ERROR(readU64(kvCount, "metadata count"));
  if (kvCount > remaining() / kMinKeyValueBytes)
    return error("metadata count " + u64(kvCount) +
                 " at offset 16 cannot fit in the file (" + u64(size_) +
                 " bytes; each entry takes at least " +
                 u64(kMinKeyValueBytes) + ")");
  if (tensorCount > remaining() / kMinTensorInfoBytes)
    return error("tensor count " + u64(tensorCount) +
                 " at offset 8 cannot fit in the file (" + u64(size_) +
                 " bytes; each tensor info takes at least " +
                 u64(kMinTensorInfoBytes) + ")");

  file_.metadata_.reserve(size_t(kvCount));
  for (uint64_t i = 0; i < kvCount; ++i) {
    const uint64_t start = pos_;
    std::string_view key;
    CONDENSATE_RETURN_IF_ERROR(
        readString(key, "metadata entry #" + u64(i) + " key"));
    const std::string where =
        "key " + quoted(key) + " (entry at offset " + u64(start) + ")";
    uint32_t typeCode = 0;
    CONDENSATE_RETURN_IF_ERROR(readU32(typeCode, where + " value type"));
    if (!isKnownValueType(typeCode))
      return error(where + " has unknown value type " + u64(typeCode));
    Value value;
    CONDENSATE_RETURN_IF_ERROR(
        readValue(static_cast<ValueType>(typeCode), value, where, 0));
    if (!file_.keyIndex_.emplace(key, file_.metadata_.size()).second)
      return error("duplicate " + where);
    file_.metadata_.emplace_back(std::string(key), std::move(value));
  }
  CONDENSATE_RETURN_IF_ERROR(readAlignment());

  if (tensorCount > remaining() / kMinTensorInfoBytes)
    return error("tensor count " + u64(tensorCount) +
                 " at offset 8 cannot fit in the " + u64(remaining()) +
                 " bytes left after the metadata (offset " + u64(pos_) + ")");
  file_.tensors_.resize(size_t(tensorCount));
  for (uint64_t i = 0; i < tensorCount; ++i) {
    const uint64_t start = pos_;
    std::string_view name;
    CONDENSATE_RETURN_IF_ERROR(parseTensorInfo(i, file_.tensors_[i], name));
    if (!file_.tensorIndex_.emplace(name, size_t(i)).second)
      return error("duplicate tensor name " + quoted(name) +
                   " (info at offset " + u64(start) + ")");
  }
  return placeTensors();
}

//===----------------------------------------------------------------------===//
// Opening a file or a buffer
//===----------------------------------------------------------------------===//

static Status parseInto(GGUFFile &file, GGUFParser &parser) {
  try {
    return parser.parse();
  } catch (const std::bad_alloc &) {
    return Status::error(file.name() + ": out of memory while parsing");
  } catch (const std::length_error &) {
    return Status::error(file.name() + ": out of memory while parsing");
  }
}

Result<GGUFFile> GGUFFile::open(const std::string &path) {
  GGUFFile file;
  file.name_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::error(path + ": cannot stat: " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  file.size_ = uint64_t(st.st_size);
  if (file.size_ > 0) {
    void *address =
        ::mmap(nullptr, size_t(file.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      Status s = Status::error(path + ": cannot map " + u64(file.size_) +
                               " bytes: " + std::strerror(errno));
      ::close(fd);
      return s;
    }
    file.mapping_ = std::make_unique<Mapping>();
    file.mapping_->address = address;
    file.mapping_->length = size_t(file.size_);
    file.base_ = static_cast<const uint8_t *>(address);
  }
  ::close(fd);
  GGUFParser parser(file);
  CONDENSATE_RETURN_IF_ERROR(parseInto(file, parser));
  return file;
}

Result<GGUFFile> GGUFFile::fromBuffer(std::vector<uint8_t> bytes,
                                      std::string name) {
  GGUFFile file;
  file.name_ = std::move(name);
  file.buffer_ = std::move(bytes);
  file.base_ = file.buffer_.data();
  file.size_ = file.buffer_.size();
  GGUFParser parser(file);
  CONDENSATE_RETURN_IF_ERROR(parseInto(file, parser));
  return file;
}

} // namespace condensate::model
