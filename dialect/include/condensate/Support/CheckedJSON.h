//===- CheckedJSON.h - JSON read with bounds, for every reader --*- C++ -*-===//
//
// How condensate reads JSON from users and files: nesting deeper than
// limits::kMaxNesting is refused before parsing (so nothing downstream
// recurses without bound), duplicated keys are errors instead of silently
// taking the last value, and failures are one line naming the source.
// Header-only over nlohmann/json; include it from .cpp files only.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_SUPPORT_CHECKEDJSON_H
#define CONDENSATE_SUPPORT_CHECKEDJSON_H

#include "condensate/Support/Nesting.h"
#include "condensate/Support/Status.h"

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace condensate {

/// Parses `text` as JSON under the rules above.
inline Result<nlohmann::json> parseCheckedJSON(const std::string &text,
                                               const std::string &where) {
  CONDENSATE_RETURN_IF_ERROR(checkNesting(text, where, Syntax::JSON));
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto callback = [&](int, nlohmann::json::parse_event_t event,
                      nlohmann::json &parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start)
      keys.emplace_back();
    else if (event == E::object_end && !keys.empty())
      keys.pop_back();
    else if (event == E::key && !keys.empty() && duplicate.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, callback,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Status::error(where + ": invalid JSON");
  if (!duplicate.empty())
    return Status::error(where + ": duplicated key '" + duplicate + "'");
  return j;
}

} // namespace condensate

#endif // CONDENSATE_SUPPORT_CHECKEDJSON_H
