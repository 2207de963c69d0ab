//===- Nesting.h - bracket depth of a text, before it is parsed -*- C++ -*-===//
//
// Parsers (nlohmann's serializer, MLIR's recursive-descent parser) recurse
// once per nesting level. Every reader of user text first checks the depth
// here, so deep input is one located error instead of a stack overflow.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_SUPPORT_NESTING_H
#define CONDENSATE_SUPPORT_NESTING_H

#include "condensate/ABI/Limits.h"
#include "condensate/Support/Status.h"

#include <string>

namespace condensate {

/// Line and column (1-based) of byte `at` of `text`.
inline std::string textPosition(const std::string &text, size_t at) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

enum class Syntax {
  JSON, ///< [ ] { }, strings in double quotes
  MLIR, ///< also ( ) < > (not the > of ->), and // line comments
};

/// Fails, naming `where`, the line and the column, at the first bracket
/// nested deeper than `maxDepth`; brackets in strings and comments do not
/// count.
inline Status checkNesting(const std::string &text, const std::string &where,
                           Syntax syntax,
                           int64_t maxDepth = limits::kMaxNesting) {
  const bool mlir = syntax == Syntax::MLIR;
  int64_t depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    // In MLIR, `->` is an arrow and `<=` / `>=` compare (affine sets).
    const bool comparison = i + 1 < text.size() && text[i + 1] == '=';
    bool opens = c == '[' || c == '{' ||
                 (mlir && (c == '(' || (c == '<' && !comparison)));
    bool closes = c == ']' || c == '}' ||
                  (mlir && (c == ')' || (c == '>' && !comparison &&
                                         (i == 0 || text[i - 1] != '-'))));
    if (c == '"') {
      inString = true;
    } else if (mlir && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string::npos)
        break;
    } else if (opens) {
      if (++depth > maxDepth)
        return Status::error(where + ":" + textPosition(text, i) +
                             ": error: nested deeper than " +
                             std::to_string(maxDepth) + " levels");
    } else if (closes && depth > 0) {
      --depth;
    }
  }
  return Status::success();
}

} // namespace condensate

#endif // CONDENSATE_SUPPORT_NESTING_H
