//===- ToolSupport.h - What the command-line tools share --------*- C++ -*-===//
//
// Finding the repository's default inputs, re-executing with
// a fixed environment, and the tools' one error convention: a Failure thrown
// anywhere below main becomes `<tool>: error: <message>` and exit code 1.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TOOLS_TOOLSUPPORT_H
#define CONDENSATE_TOOLS_TOOLSUPPORT_H

#include "condensate/Runtime/Files.h"
#include "condensate/Support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace condensate::tools {

bool isRegularFile(const std::string &path);

/// `relative` in the current directory, else in the source tree the tools
/// were built from; "" if in neither.
std::string locate(const std::string &relative);

/// The source paper's schedule, located like the default inputs.
constexpr const char *kPaperSchedule = "examples/paper.mlir";

/// A --policy argument: its name for reports and its text (JSON or MLIR).
struct PolicySpec {
  std::string name, text;
};
/// `dense`, `paper` (kPaperSchedule), `@FILE` (the file's contents) or the
/// policy itself; fails where a file cannot be found or read.
PolicySpec policySpec(const std::string &arg);

/// Re-executes this program with `variable=value` when `value` is not empty,
/// unless the user set `variable` or this is the re-executed program
/// (`marker` set). Used to hand OpenBLAS a core type it did not detect
/// (blasCoreRecommendation); if exec fails the program carries on.
void reexecWith(char **argv, const char *variable, const std::string &value,
                const char *marker);

/// An error to report and exit on.
struct Failure {
  std::string message;
};
[[noreturn]] void fail(const std::string &message);
/// The value of `r`, or fail with its message.
template <typename T> T take(Result<T> r) {
  if (!r)
    fail(r.message());
  return r.take();
}
/// Fails with `s`'s message unless it is ok.
void check(const Status &s);
/// The largest --threads a tool accepts, and the most tokens it generates
/// or continues a prompt by (--max-new-tokens, --natural-tokens).
constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxGeneratedTokens = int64_t(1) << 20;
/// --fallback-memory's default (DecoderOptions::fallbackMemory) in
/// condensate-decode and condensate-bench; a macro so that their help
/// strings can name it.
#define CONDENSATE_FALLBACK_MEMORY 16
#define CONDENSATE_STRINGIFY_(x) #x
#define CONDENSATE_STRINGIFY(x) CONDENSATE_STRINGIFY_(x)
constexpr int64_t kFallbackMemory = CONDENSATE_FALLBACK_MEMORY;
/// Its help entry, the description from column `INDENT` (a string of
/// spaces) after `FLAG` (the flag padded to that column).
#define CONDENSATE_FALLBACK_MEMORY_HELP(FLAG, INDENT)                          \
  FLAG "a certified layer whose step read at least\n" INDENT                   \
       "dense's bytes runs dense attention for the next\n" INDENT              \
       "N steps, then is tried again (default " CONDENSATE_STRINGIFY(          \
           CONDENSATE_FALLBACK_MEMORY) "; 0: every\n" INDENT                   \
                                       "step certifies)\n"

/// `text` as a decimal integer in [min, max], or fail naming `flag`.
int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min, int64_t max);

/// The non-empty items of a comma-separated list.
std::vector<std::string> splitList(const std::string &s);
/// splitList, failing naming `flag` when the list names nothing (an empty
/// list would otherwise mean "all").
std::vector<std::string> nonEmptyList(const std::string &flag,
                                      const std::string &s);

/// A one-line progress bar on a terminal's stderr: "LABEL [###...] 42%",
/// followed by a short note of what is running.
class ProgressBar {
public:
  ProgressBar(bool enabled, std::string label)
      : enabled_(enabled), label_(std::move(label)) {}
  ~ProgressBar() { finish(); }
  void update(int64_t done, int64_t total, const std::string &note = "");
  void finish();

private:
  bool enabled_;
  std::string label_;
  bool drawn_ = false;
};

/// Runs `body` and returns its exit code; a Failure, std::bad_alloc or other
/// exception is printed as one `<tool>: error: ...` line and returns 1.
int runMain(const char *tool, const std::function<int()> &body);

} // namespace condensate::tools

#endif // CONDENSATE_TOOLS_TOOLSUPPORT_H
