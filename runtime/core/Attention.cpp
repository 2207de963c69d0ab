//===- Attention.cpp - argument checks of attention and append calls ------===//
//
// One set of checks for every program kind (CPU JIT, GPU, AOT), run before
// a generated function sees the buffers: sizes, required pointers and, where
// the tables are host memory, every length and referenced page.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

namespace condensate {

namespace {

Status checkSizes(const char *what, int64_t batch, int64_t maxPages,
                  int64_t numPages) {
  if (batch <= 0 || maxPages <= 0 || numPages <= 0)
    return Status::error(std::string(what) +
                         ": batch, maxPages and numPages must be > 0");
  return Status::success();
}

/// Every length of `lens` [count] in [1, maxPages * pageSize] and every page
/// its sequence's row of `pageTable` [count, maxPages] references in [0,
/// numPages); errors name `what` and the entry.
Status checkTables(const char *what, const ModelShape &s, int64_t count,
                   const int32_t *lens, const int32_t *pageTable,
                   int64_t maxPages, int64_t numPages) {
  for (int64_t b = 0; b < count; ++b) {
    int64_t n = lens[b];
    if (n <= 0 || n > maxPages * s.pageSize)
      return Status::error(std::string(what) + ": lens[" + std::to_string(b) +
                           "] = " + std::to_string(n) + " outside [1, " +
                           std::to_string(maxPages * s.pageSize) + "]");
    for (int64_t j = 0; j * s.pageSize < n; ++j) {
      int32_t page = pageTable[b * maxPages + j];
      if (page < 0 || page >= numPages)
        return Status::error(std::string(what) + ": page_table[" +
                             std::to_string(b) + ", " + std::to_string(j) +
                             "] = " + std::to_string(page) + " outside [0, " +
                             std::to_string(numPages) + ")");
    }
  }
  return Status::success();
}

} // namespace

double bytesRead(const Policy &p, const ModelShape &s, int64_t n,
                 const float *stats) {
  const double d = double(s.headDim), kvBytes = kvTypeBytes(s.kvType);
  const double row = d * kvBytes, summaryRow = d * 4.0;
  const double dense = 2.0 * double(n) * row;
  double bytes = 0.0;
  if (p.dense ||
      (p.certified() && stats[abi::StatFallback] == abi::kRanDense)) {
    bytes = dense;
  } else {
    const double pages = double((n + s.pageSize - 1) / s.pageSize);
    const double fullPages = double(n / s.pageSize);
    // Scoring.
    if (p.topk > 0 || p.certified()) {
      switch (p.selector) {
      case Selector::Exact:
        bytes += double(n) * row;
        break;
      case Selector::BlockMinMax:
        bytes += pages * 2 * summaryRow;
        break;
      case Selector::BlockMean:
        // The certificate scores min/max bounds as well.
        bytes += pages * (p.certified() ? 3 : 1) * summaryRow;
        break;
      case Selector::Sketch:
        bytes += pages * 2 * summaryRow +
                 fullPages *
                     double(abi::sketchRows(s.pageSize, p.sketchBits)) *
                     summaryRow;
        break;
      }
    }
    // The certificate's early test reads the anchor and window keys,
    // unless every unit has a slot (open extras): its last slot is then
    // empty, and one load of it ends the test.
    const int64_t units = (n + p.unitTokens() - 1) / p.unitTokens();
    if (p.certified() && p.tau > 0.0 && p.topUnits() + p.maxExtra < units)
      bytes += double(std::min<int64_t>(p.anchor + p.windowMax, n)) * row;
    const float flag = p.certified() ? stats[abi::StatFallback] : 0.0f;
    if (flag == abi::kFellBackEarly) {
      // Dense attention only: no sparse pass.
      bytes += dense;
    } else if (flag != 0.0f) {
      // The sparse pass ran before the decision, then the dense one.
      bytes += 2.0 * double(std::min<int64_t>(p.budget(), n)) * row + dense;
    } else {
      bytes += 2.0 * double(stats[abi::StatAttended]) * row;
      // A certificate that passed walked the value box of the omitted pages
      // (for the output bound).
      if (p.certified() && p.outputBound)
        bytes += pages * 2 * summaryRow;
    }
  }
  return bytes / double(s.group());
}

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
  return checkTables("attend", s, a.batch, a.lens, a.pageTable, a.maxPages,
                     a.numPages);
}

Status checkPrefillArgs(const ModelShape &s, const PrefillArgs &a,
                        bool hostTables) {
  if (a.rows <= 0 || a.seqs <= 0 || a.maxPages <= 0 || a.numPages <= 0)
    return Status::error(
        "prefill: rows, seqs, maxPages and numPages must be > 0");
  if (!a.q || !a.kCache || !a.vCache || !a.pageTable || !a.lens ||
      !a.rowStarts || !a.out)
    return Status::error("prefill: a required buffer is null");
  if (!hostTables)
    return Status::success();
  if (a.rowStarts[0] != 0)
    return Status::error("prefill: row_starts[0] = " +
                         std::to_string(a.rowStarts[0]) + ", expected 0");
  if (a.rowStarts[a.seqs] != a.rows)
    return Status::error("prefill: row_starts[" + std::to_string(a.seqs) +
                         "] = " + std::to_string(a.rowStarts[a.seqs]) +
                         ", expected the row count " + std::to_string(a.rows));
  CONDENSATE_RETURN_IF_ERROR(checkTables("prefill", s, a.seqs, a.lens,
                                         a.pageTable, a.maxPages,
                                         a.numPages));
  for (int64_t b = 0; b < a.seqs; ++b) {
    const int64_t count = int64_t(a.rowStarts[b + 1]) - a.rowStarts[b];
    if (count < 0)
      return Status::error("prefill: row_starts decreases at " +
                           std::to_string(b + 1));
    if (count > a.lens[b])
      return Status::error("prefill: sequence " + std::to_string(b) +
                           " has " + std::to_string(count) +
                           " rows but only " + std::to_string(a.lens[b]) +
                           " positions");
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
  // Rows that land in one page must be consecutive, in position order
  // (append_kv's contract: a page's tokens are folded in that order, and
  // the GPU gives each run to one block).
  std::unordered_set<int32_t> closed;
  int32_t runPage = -1;
  int64_t runPos = 0;
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
    if (b > 0 && page == runPage && pos != runPos + 1)
      return Status::error(
          "append: rows " + std::to_string(b - 1) + " and " +
          std::to_string(b) + " land in page " + std::to_string(page) +
          " at positions " + std::to_string(runPos) + " and " +
          std::to_string(pos) + "; a page's rows must be in position order");
    if (b > 0 && page != runPage) {
      closed.insert(runPage);
      if (closed.count(page))
        return Status::error("append: row " + std::to_string(b) +
                             " lands in page " + std::to_string(page) +
                             " after other rows; a page's rows must be "
                             "consecutive");
    }
    runPage = page;
    runPos = pos;
  }
  // A NaN or infinite key or value would poison its page's summaries,
  // sketch and every bound built on them.
  const int64_t row = s.kvHeads * s.headDim;
  for (auto [name, data] : {std::pair<const char *, const float *>{"k_new",
                                                                   a.kNew},
                            {"v_new", a.vNew}})
    for (int64_t i = 0; i < a.batch * row; ++i)
      if (!std::isfinite(data[i]))
        return Status::error(
            std::string("append: ") + name + "[" + std::to_string(i / row) +
            ", " + std::to_string(i % row / s.headDim) + ", " +
            std::to_string(i % s.headDim) + "] is " +
            (std::isnan(data[i]) ? "NaN" : "infinite"));
  return Status::success();
}

} // namespace condensate
