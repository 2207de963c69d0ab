//===- Attention.cpp - argument checks of attention and append calls ------===//
//
// One set of checks for every program kind (CPU JIT, GPU, AOT), run before
// a generated function sees the buffers: sizes, required pointers and, where
// the tables are host memory, every length and referenced page.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Attention.h"

#include <string>

namespace condensate {

namespace {

Status checkSizes(const char *what, int64_t batch, int64_t maxPages,
                  int64_t numPages) {
  if (batch <= 0 || maxPages <= 0 || numPages <= 0)
    return Status::error(std::string(what) +
                         ": batch, maxPages and numPages must be > 0");
  return Status::success();
}

} // namespace

Status checkAttentionArgs(const ModelShape &s, const AttentionArgs &a,
                          bool adaptive, bool hostTables) {
  CONDENSATE_RETURN_IF_ERROR(
      checkSizes("attend", a.batch, a.maxPages, a.numPages));
  if (!a.q || !a.kCache || !a.vCache || !a.pageTable || !a.lens ||
      !a.summaries || !a.out || !a.stats)
    return Status::error("attend: a required buffer is null");
  if (adaptive && !a.windows)
    return Status::error(
        "attend: the layer has an adaptive window and needs 'windows'");
  if (!hostTables)
    return Status::success();
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t n = a.lens[b];
    if (n <= 0 || n > a.maxPages * s.pageSize)
      return Status::error("attend: lens[" + std::to_string(b) + "] = " +
                           std::to_string(n) + " outside [1, " +
                           std::to_string(a.maxPages * s.pageSize) + "]");
    for (int64_t j = 0; j * s.pageSize < n; ++j) {
      int32_t page = a.pageTable[b * a.maxPages + j];
      if (page < 0 || page >= a.numPages)
        return Status::error("attend: page_table[" + std::to_string(b) +
                             ", " + std::to_string(j) + "] = " +
                             std::to_string(page) + " outside [0, " +
                             std::to_string(a.numPages) + ")");
    }
  }
  return Status::success();
}

Status checkAppendArgs(const ModelShape &s, const AppendArgs &a,
                       bool hostTables) {
  CONDENSATE_RETURN_IF_ERROR(
      checkSizes("append", a.batch, a.maxPages, a.numPages));
  if (!a.kNew || !a.vNew || !a.kCache || !a.vCache || !a.pageTable ||
      !a.positions || !a.summaries)
    return Status::error("append: a required buffer is null");
  if (!hostTables)
    return Status::success();
  for (int64_t b = 0; b < a.batch; ++b) {
    int64_t pos = a.positions[b];
    if (pos < 0 || pos >= a.maxPages * s.pageSize)
      return Status::error("append: positions[" + std::to_string(b) +
                           "] = " + std::to_string(pos) + " outside [0, " +
                           std::to_string(a.maxPages * s.pageSize) + ")");
    int32_t page = a.pageTable[b * a.maxPages + pos / s.pageSize];
    if (page < 0 || page >= a.numPages)
      return Status::error("append: page_table[" + std::to_string(b) + ", " +
                           std::to_string(pos / s.pageSize) + "] = " +
                           std::to_string(page) + " outside [0, " +
                           std::to_string(a.numPages) + ")");
  }
  return Status::success();
}

} // namespace condensate
