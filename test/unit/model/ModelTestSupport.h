//===- ModelTestSupport.h - GGUF writer and reference hooks for tests -----===//
//
// A small GGUF writer for building valid and deliberately damaged files in
// memory, and helpers that locate the real model and run the independent
// Python reference (test/python/gguf_reference.py).
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_MODEL_MODELTESTSUPPORT_H
#define CONDENSATE_TEST_MODEL_MODELTESTSUPPORT_H

#include "condensate/DefaultModel.h"
#include "condensate/Model/GGUF.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace condensate::model::testsupport {

//===----------------------------------------------------------------------===//
// Writing GGUF files
//===----------------------------------------------------------------------===//

/// Little-endian byte appender.
struct Bytes {
  std::vector<uint8_t> data;

  template <typename T> Bytes &put(T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    data.insert(data.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes &str(std::string_view s) {
    put<uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes &raw(const std::vector<uint8_t> &bytes) {
    data.insert(data.end(), bytes.begin(), bytes.end());
    return *this;
  }
  Bytes &padTo(size_t alignment, uint8_t fill = 0) {
    while (data.size() % alignment)
      data.push_back(fill);
    return *this;
  }
};

/// Builds a GGUF file: metadata entries are stored pre-serialised (type code
/// plus payload) so tests can also write malformed ones.
class GGUFBuilder {
public:
  uint32_t version = 3;
  uint64_t alignment = 32; // Layout alignment; written only via add*().

  GGUFBuilder &addRaw(std::string key, uint32_t typeCode,
                      std::vector<uint8_t> payload) {
    kvs_.push_back({std::move(key), typeCode, std::move(payload)});
    return *this;
  }
  template <typename T>
  GGUFBuilder &addScalar(std::string key, ValueType type, T value) {
    Bytes b;
    b.put<T>(value);
    return addRaw(std::move(key), uint32_t(type), b.data);
  }
  GGUFBuilder &addU32(std::string key, uint32_t v) {
    return addScalar(std::move(key), ValueType::UInt32, v);
  }
  GGUFBuilder &addF32(std::string key, float v) {
    return addScalar(std::move(key), ValueType::Float32, v);
  }
  GGUFBuilder &addBool(std::string key, bool v) {
    return addScalar(std::move(key), ValueType::Bool, uint8_t(v));
  }
  GGUFBuilder &addString(std::string key, std::string_view v) {
    Bytes b;
    b.str(v);
    return addRaw(std::move(key), uint32_t(ValueType::String), b.data);
  }
  GGUFBuilder &addStringArray(std::string key,
                              const std::vector<std::string> &items) {
    Bytes b;
    b.put<uint32_t>(uint32_t(ValueType::String)).put<uint64_t>(items.size());
    for (const std::string &s : items)
      b.str(s);
    return addRaw(std::move(key), uint32_t(ValueType::Array), b.data);
  }
  template <typename T>
  GGUFBuilder &addArray(std::string key, ValueType elementType,
                        const std::vector<T> &items) {
    Bytes b;
    b.put<uint32_t>(uint32_t(elementType)).put<uint64_t>(items.size());
    for (const T &v : items)
      b.put<T>(v);
    return addRaw(std::move(key), uint32_t(ValueType::Array), b.data);
  }
  /// Adds a tensor; `dims` in GGUF order, `data` its bytes. Data is laid out
  /// in order at aligned offsets; `offsetOverride` >= 0 replaces the offset
  /// written in the tensor info (not where the data goes), to damage files.
  GGUFBuilder &addTensor(std::string name, uint32_t typeCode,
                         std::vector<uint64_t> dims, std::vector<uint8_t> data,
                         int64_t offsetOverride = -1) {
    tensors_.push_back({std::move(name), typeCode, std::move(dims),
                        std::move(data), offsetOverride});
    return *this;
  }

  /// Serialises header, metadata, tensor infos, padding and tensor data. The
  /// last tensor ends exactly at the end of the file.
  std::vector<uint8_t> build() const {
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor &t : tensors_) {
      next = (next + alignment - 1) / alignment * alignment;
      offsets.push_back(next);
      next += t.data.size();
    }
    Bytes b;
    b.raw({'G', 'G', 'U', 'F'}).put<uint32_t>(version);
    b.put<uint64_t>(tensors_.size()).put<uint64_t>(kvs_.size());
    for (const KV &kv : kvs_)
      b.str(kv.key).put<uint32_t>(kv.typeCode).raw(kv.payload);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor &t = tensors_[i];
      b.str(t.name).put<uint32_t>(uint32_t(t.dims.size()));
      for (uint64_t d : t.dims)
        b.put<uint64_t>(d);
      b.put<uint32_t>(t.typeCode)
          .put<uint64_t>(t.offsetOverride >= 0 ? uint64_t(t.offsetOverride)
                                               : offsets[i]);
    }
    if (tensors_.empty())
      return b.data;
    b.padTo(alignment);
    const size_t dataStart = b.data.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (b.data.size() < dataStart + offsets[i])
        b.data.resize(dataStart + offsets[i], 0);
      b.raw(tensors_[i].data);
    }
    return b.data;
  }

private:
  struct KV {
    std::string key;
    uint32_t typeCode;
    std::vector<uint8_t> payload;
  };
  struct Tensor {
    std::string name;
    uint32_t typeCode;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
    int64_t offsetOverride;
  };
  std::vector<KV> kvs_;
  std::vector<Tensor> tensors_;
};

//===----------------------------------------------------------------------===//
// Files, processes and the reference
//===----------------------------------------------------------------------===//

inline bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

inline std::string repoRoot() { return CONDENSATE_TEST_REPO_ROOT; }

/// $CONDENSATE_MODEL, else the default model (CONDENSATE_DEFAULT_MODEL) in
/// the repository.
inline std::string modelCandidate() {
  const char *env = std::getenv("CONDENSATE_MODEL");
  return env && *env ? std::string(env)
                     : repoRoot() + "/" CONDENSATE_DEFAULT_MODEL;
}

/// modelCandidate() if that file exists, else empty.
inline std::string modelPath() {
  const std::string path = modelCandidate();
  return fileExists(path) ? path : std::string();
}

inline std::string modelSkipMessage() {
  return "real model not found at " + modelCandidate() +
         " (scripts/setup.sh fetches it, or set CONDENSATE_MODEL)";
}

/// The second model family's file: $CONDENSATE_QWEN_MODEL, else
/// models/Qwen2.5-Coder-0.5B-Instruct.gguf (scripts/fetch-models.sh qwen2);
/// empty when absent.
inline std::string qwenCandidate() {
  const char *env = std::getenv("CONDENSATE_QWEN_MODEL");
  return env && *env ? std::string(env)
                     : repoRoot() + "/models/Qwen2.5-Coder-0.5B-Instruct.gguf";
}
inline std::string qwenModelPath() {
  const std::string path = qwenCandidate();
  return fileExists(path) ? path : std::string();
}
inline std::string qwenSkipMessage() {
  return "Qwen2 model not found at " + qwenCandidate() +
         " (scripts/fetch-models.sh qwen2 fetches it, or set "
         "CONDENSATE_QWEN_MODEL)";
}

/// $CONDENSATE_GEMMA_MODEL, else models/gemma-3-270m-q4_k_m.gguf
/// (scripts/fetch-models.sh gemma3).
inline std::string gemmaCandidate() {
  const char *env = std::getenv("CONDENSATE_GEMMA_MODEL");
  return env && *env ? std::string(env)
                     : repoRoot() + "/models/gemma-3-270m-q4_k_m.gguf";
}
inline std::string gemmaModelPath() {
  const std::string path = gemmaCandidate();
  return fileExists(path) ? path : std::string();
}
inline std::string gemmaSkipMessage() {
  return "Gemma 3 model not found at " + gemmaCandidate() +
         " (scripts/fetch-models.sh gemma3 fetches it, or set "
         "CONDENSATE_GEMMA_MODEL)";
}

inline std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// $CONDENSATE_PYTHON, else the interpreter CMake found.
inline std::string python() {
  const char *env = std::getenv("CONDENSATE_PYTHON");
  return env && *env ? std::string(env) : std::string(CONDENSATE_TEST_PYTHON);
}

inline std::string referenceScript() {
  return repoRoot() + "/test/python/gguf_reference.py";
}

/// Whether the Python reference can run (numpy, gguf and tokenizers import).
inline bool referenceAvailable() {
  static const bool available =
      std::system((shellQuote(python()) +
                   " -c 'import numpy, gguf, tokenizers' >/dev/null 2>&1")
                      .c_str()) == 0;
  return available;
}

inline std::string referenceSkipMessage() {
  return "Python reference unavailable: '" + python() +
         " -c \"import numpy, gguf, tokenizers\"' failed (pip install numpy "
         "gguf tokenizers, or set CONDENSATE_PYTHON)";
}

/// A per-process path in the test temp directory (ctest runs tests in
/// parallel processes), removed with its ".json" sidecar on destruction.
class TempPath {
public:
  explicit TempPath(const std::string &name)
      : path_(::testing::TempDir() + "condensate_" +
              std::to_string(::getpid()) + "_" + name) {}
  ~TempPath() {
    std::remove(path_.c_str());
    std::remove((path_ + ".json").c_str());
  }
  TempPath(const TempPath &) = delete;
  TempPath &operator=(const TempPath &) = delete;
  const std::string &str() const { return path_; }
  operator const std::string &() const { return path_; }

private:
  std::string path_;
};

/// Runs the reference script with `args` (already shell-quoted); returns the
/// exit status and puts its combined output in `log`.
inline int runReference(const std::string &args, std::string &log) {
  const TempPath logPath("gguf_reference.log");
  const std::string cmd = shellQuote(python()) + " " +
                          shellQuote(referenceScript()) + " " + args + " >" +
                          shellQuote(logPath) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(logPath.str());
  log.assign(std::istreambuf_iterator<char>(in), {});
  return rc;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeFile(const std::string &path, const void *data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char *>(data), std::streamsize(size));
}

/// Errors must be one line that names the file.
inline void expectOneLineError(const Status &status, const std::string &name) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().find('\n'), std::string::npos)
      << status.message();
  EXPECT_EQ(status.message().rfind(name, 0), 0u) << status.message();
}

} // namespace condensate::model::testsupport

#endif // CONDENSATE_TEST_MODEL_MODELTESTSUPPORT_H
