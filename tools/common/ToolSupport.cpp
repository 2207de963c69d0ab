//===- ToolSupport.cpp - What the command-line tools share ----------------===//
#include "ToolSupport.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
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

} // namespace condensate::tools
