//===- ToolSupport.cpp - What the command-line tools share ----------------===//
#include "ToolSupport.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <sstream>
#include <unistd.h>

namespace condensate::tools {

int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || v < min || v > max)
    fail(flag + " expects an integer in [" + std::to_string(min) + ", " +
         std::to_string(max) + "], got '" + text + "'");
  return v;
}

std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item);
  return out;
}

std::vector<std::string> nonEmptyList(const std::string &flag,
                                      const std::string &s) {
  std::vector<std::string> out = splitList(s);
  if (out.empty())
    fail(flag + ": the list is empty");
  return out;
}

bool isRegularFile(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string locate(const std::string &relative) {
  if (isRegularFile(relative))
    return relative;
  const std::string repo = std::string(CONDENSATE_SOURCE_DIR) + "/" + relative;
  return isRegularFile(repo) ? repo : "";
}

PolicySpec policySpec(const std::string &arg) {
  if (arg == "dense")
    return {"dense", "#condensate.dense"};
  if (arg == "paper") {
    const std::string path = locate(kPaperSchedule);
    if (path.empty())
      fail(std::string("--policy paper: ") + kPaperSchedule + " not found");
    return {"paper (" + path + ")", take(readFile(path))};
  }
  if (!arg.empty() && arg[0] == '@') {
    const std::string path = arg.substr(1);
    Result<std::string> content = readFile(path);
    if (!content)
      fail("policy file: " + content.message());
    return {path, *content};
  }
  return {"inline", arg};
}

void reexecWith(char **argv, const char *variable, const std::string &value,
                const char *marker) {
  if (value.empty() || std::getenv(variable) || std::getenv(marker))
    return;
  ::setenv(variable, value.c_str(), 1);
  ::setenv(marker, "1", 1);
  ::execv("/proc/self/exe", argv);
}

void fail(const std::string &message) { throw Failure{message}; }

void check(const Status &s) {
  if (!s.ok())
    fail(s.message());
}

int runMain(const char *tool, const std::function<int()> &body) {
  try {
    return body();
  } catch (const Failure &f) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", tool, f.message.c_str());
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "%s: error: out of memory\n", tool);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
  }
  return 1;
}

void ProgressBar::update(int64_t done, int64_t total, const std::string &note) {
  if (!enabled_ || total <= 0)
    return;
  const int width = 40;
  const int filled = int(width * std::clamp<int64_t>(done, 0, total) / total);
  std::fprintf(stderr, "\r%s [%s%s] %3d%% %-40.40s", label_.c_str(),
               std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(),
               int(100 * std::clamp<int64_t>(done, 0, total) / total),
               note.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_)
    std::fprintf(stderr, "\r%120s\r", "");
  drawn_ = false;
}

} // namespace condensate::tools
