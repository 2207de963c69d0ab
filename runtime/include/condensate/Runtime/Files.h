//===- Files.h - whole-file reads and atomic writes -------------*- C++ -*-===//
//
// The file helpers every part of condensate uses: reading a file whole with
// a located error, writing one atomically (so concurrent processes never
// see half a cache entry), and creating directories.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_RUNTIME_FILES_H
#define CONDENSATE_RUNTIME_FILES_H

#include "condensate/Support/Status.h"

#include <cstdint>
#include <string>

namespace condensate {

/// The contents of `path`; "cannot read 'path': reason" on failure, or when
/// the file is larger than `maxBytes`.
Result<std::string> readFile(const std::string &path,
                             int64_t maxBytes = int64_t(1) << 34);

/// Writes `data` to `path` through a temporary file and a rename.
Status writeFileAtomic(const std::string &path, const std::string &data);

/// Creates `path` and its parents (like mkdir -p).
Status makeDirectories(const std::string &path);

} // namespace condensate

#endif // CONDENSATE_RUNTIME_FILES_H
