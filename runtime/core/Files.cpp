//===- Files.cpp - whole-file reads and atomic writes ---------------------===//
//
// Implements condensate/Runtime/Files.h with POSIX calls.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace condensate {

Result<std::string> readFile(const std::string &path, int64_t maxBytes) {
  auto fail = [&](const std::string &why) {
    return Status::error("cannot read '" + path + "': " + why);
  };
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return fail(std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return fail("is a directory");
  if (S_ISREG(st.st_mode) && st.st_size > maxBytes)
    return fail("larger than " + std::to_string(maxBytes) + " bytes");
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return fail(std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (static_cast<int64_t>(out.size() + n) > maxBytes) {
      std::fclose(f);
      return fail("larger than " + std::to_string(maxBytes) + " bytes");
    }
    out.append(buf, n);
  }
  bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad)
    return fail("read error");
  return out;
}

Status makeDirectories(const std::string &path) {
  std::string partial;
  std::istringstream parts(path);
  if (!path.empty() && path[0] == '/')
    partial = "/";
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty())
      continue;
    partial += part + "/";
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::error("cannot create directory " + partial + ": " +
                           std::strerror(errno));
  }
  return Status::success();
}

Status writeFileAtomic(const std::string &path, const std::string &data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::error("cannot write '" + tmp + "': " +
                         std::strerror(errno));
  bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::error("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot rename '" + tmp + "' to '" + path + "'");
  }
  return Status::success();
}

} // namespace condensate
