//===- PolicyJSON.cpp - policies, schedules and shapes as JSON ------------===//
//
// The one JSON form of the runtime's plain descriptions: policies and
// schedules (what users write and manifests store), model shapes, and the
// {"model", "schedule"} spec condensate-translate reads. Parsing rejects
// unknown fields and wrong types with one-line messages; printing round-trips.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Policy.h"

#include "condensate/ABI/AttentionABI.h"
#include "condensate/ABI/Limits.h"

#include "condensate/Support/CheckedJSON.h"

#include <set>
#include <sstream>

namespace condensate {

namespace {

using nlohmann::json;

Result<int64_t> getInt(const json &obj, const char *key, int64_t def,
                       const std::string &where) {
  auto it = obj.find(key);
  if (it == obj.end())
    return def;
  if (!it->is_number_integer())
    return Status::error(where + ": '" + key + "' must be an integer, got " +
                         it->dump());
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))
    return Status::error(where + ": '" + key + "' is too large, got " +
                         it->dump());
  return it->get<int64_t>();
}

Result<Policy> policyFromJSON(const json &j, const std::string &where) {
  if (j.is_string()) {
    if (j.get<std::string>() == "dense")
      return Policy::makeDense();
    return Status::error(where + ": a policy string must be \"dense\", got " +
                         j.dump());
  }
  if (!j.is_object())
    return Status::error(where + ": a policy must be an object or \"dense\"");
  static const std::set<std::string> known = {
      "anchor", "window",    "window_max", "topk",  "selector",    "page_size",
      "tau",    "max_extra", "bits",       "dense", "output_bound"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      return Status::error(where + ": unknown policy field '" + it.key() +
                           "'");
  if (j.contains("dense") && j["dense"] == true)
    return Policy::makeDense();
  Policy p;
  if (!j.contains("window"))
    return Status::error(where + ": a policy needs a 'window' field");
  auto anchor = getInt(j, "anchor", 1, where);
  auto window = getInt(j, "window", 0, where);
  auto topk = getInt(j, "topk", 0, where);
  auto page = getInt(j, "page_size", 16, where);
  auto extra = getInt(j, "max_extra", 0, where);
  for (auto *r : {&anchor, &window, &topk, &page, &extra})
    if (!r->ok())
      return r->status();
  p.anchor = *anchor;
  p.window = *window;
  auto wmax = getInt(j, "window_max", p.window, where);
  if (!wmax.ok())
    return wmax.status();
  p.windowMax = *wmax;
  p.topk = *topk;
  p.pageSize = *page;
  p.maxExtra = *extra;
  if (j.contains("selector")) {
    const json &s = j["selector"];
    std::string name = s.is_string() ? s.get<std::string>() : "";
    if (name == "exact")
      p.selector = Selector::Exact;
    else if (name == "block_minmax")
      p.selector = Selector::BlockMinMax;
    else if (name == "block_mean")
      p.selector = Selector::BlockMean;
    else if (name == "sketch")
      p.selector = Selector::Sketch;
    else
      return Status::error(where + ": unknown selector " + s.dump() +
                           "; expected exact, block_minmax, block_mean or "
                           "sketch");
  }
  auto bits = getInt(j, "bits", p.selector == Selector::Sketch ? 4 : 0, where);
  if (!bits.ok())
    return bits.status();
  p.sketchBits = *bits;
  if (j.contains("tau")) {
    const json &t = j["tau"];
    if (t.is_string() && t.get<std::string>() == "strict")
      p.tau = abi::kStrictTau;
    else if (t.is_number())
      p.tau = t.get<double>();
    else
      return Status::error(where + ": 'tau' must be a number or \"strict\"");
  }
  if (j.contains("output_bound")) {
    if (!j["output_bound"].is_boolean())
      return Status::error(where +
                           ": 'output_bound' must be true or false, got " +
                           j["output_bound"].dump());
    p.outputBound = j["output_bound"].get<bool>();
  }
  CONDENSATE_RETURN_IF_ERROR(p.validate().withContext(where));
  return p;
}

Result<std::vector<int64_t>> indexListFromJSON(const json &j,
                                               const std::string &where) {
  if (!j.is_array())
    return Status::error(where + " must be an array");
  constexpr int64_t bound = limits::kMaxIndexEntries;
  std::vector<int64_t> out;
  auto add = [&](int64_t first, int64_t last) -> Status {
    // Bounded before anything is expanded.
    if (first < 0 || last >= bound)
      return Status::error(where + ": index " +
                           std::to_string(first < 0 ? first : last) +
                           " is out of bounds (indices are in [0, " +
                           std::to_string(bound) + "))");
    if (static_cast<int64_t>(out.size()) + (last - first + 1) > bound)
      return Status::error(where + " names more than " +
                           std::to_string(bound) + " indices");
    for (int64_t i = first; i <= last; ++i)
      out.push_back(i);
    return Status::success();
  };
  for (const json &e : j) {
    if (e.is_number_integer()) {
      int64_t v = e.is_number_unsigned() &&
                          e.get<uint64_t>() > uint64_t(INT64_MAX)
                      ? INT64_MAX
                      : e.get<int64_t>();
      CONDENSATE_RETURN_IF_ERROR(add(v, v));
      continue;
    }
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      long long a, b;
      char dash;
      std::istringstream is(s);
      if ((is >> a >> dash >> b) && dash == '-' && is.eof()) {
        if (a > b)
          return Status::error(where + ": empty range \"" + s + "\"");
        CONDENSATE_RETURN_IF_ERROR(add(a, b));
        continue;
      }
    }
    return Status::error(where + ": entries must be integers or \"a-b\" "
                                 "ranges, got " +
                         e.dump());
  }
  return out;
}

} // namespace

Result<Schedule> parseScheduleJSON(const std::string &text,
                                   int64_t numLayers) {
  auto parsed = parseCheckedJSON(text, "schedule");
  if (!parsed.ok())
    return parsed.status();
  json j = parsed.take();
  Schedule s;
  s.numLayers = numLayers;
  bool isSchedule = j.is_object() && (j.contains("default") ||
                                      j.contains("rules"));
  if (!isSchedule) {
    auto p = policyFromJSON(j, "policy");
    if (!p.ok())
      return p.status();
    s.defaultPolicy = *p;
    return s;
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "default" && it.key() != "rules" && it.key() != "layers" &&
        it.key() != "depth")
      return Status::error("schedule: unknown field '" + it.key() + "'");
  if (j.contains("depth")) {
    if (!j["depth"].is_string() ||
        (j["depth"] != "relative" && j["depth"] != "fixed"))
      return Status::error("schedule: 'depth' must be \"relative\" or "
                           "\"fixed\", got " +
                           j["depth"].dump());
    s.relativeDepth = j["depth"] == "relative";
  }
  if (s.relativeDepth && !j.contains("layers"))
    return Status::error("schedule: 'depth': \"relative\" needs the "
                         "'layers' its rules were written for");
  if (j.contains("layers")) {
    if (!j["layers"].is_number_integer())
      return Status::error("schedule: 'layers' must be an integer, got " +
                           j["layers"].dump());
    const int64_t written = j["layers"].get<int64_t>();
    if (!s.relativeDepth && written != numLayers)
      return Status::error("schedule: 'layers' is " + j["layers"].dump() +
                           " but the model has " + std::to_string(numLayers) +
                           " layers (\"depth\": \"relative\" applies a "
                           "schedule at any depth)");
    s.numLayers = written;
  }
  if (!j.contains("default"))
    return Status::error("schedule: needs a 'default' policy");
  auto def = policyFromJSON(j["default"], "schedule default");
  if (!def.ok())
    return def.status();
  s.defaultPolicy = *def;
  if (j.contains("rules")) {
    if (!j["rules"].is_array())
      return Status::error("schedule: 'rules' must be an array");
    size_t i = 0;
    for (const json &r : j["rules"]) {
      std::string where = "schedule rule " + std::to_string(i++);
      if (!r.is_object() || !r.contains("layers") || !r.contains("policy"))
        return Status::error(where + ": needs 'layers' and 'policy'");
      ScheduleRule rule;
      auto layers = indexListFromJSON(r["layers"], where + " layers");
      if (!layers.ok())
        return layers.status();
      rule.layers = *layers;
      if (r.contains("kv_heads")) {
        auto heads = indexListFromJSON(r["kv_heads"], where + " kv_heads");
        if (!heads.ok())
          return heads.status();
        rule.kvHeads = *heads;
      }
      auto p = policyFromJSON(r["policy"], where);
      if (!p.ok())
        return p.status();
      rule.policy = *p;
      s.rules.push_back(rule);
    }
  }
  CONDENSATE_RETURN_IF_ERROR(s.validate());
  return s.atDepth(numLayers);
}


namespace {

nlohmann::json policyToJSON(const Policy &p) {
  if (p.dense)
    return "dense";
  nlohmann::json j = {{"anchor", p.anchor},
                      {"window", p.window},
                      {"window_max", p.windowMax},
                      {"topk", p.topk},
                      {"selector", selectorName(p.selector)},
                      {"page_size", p.pageSize},
                      {"max_extra", p.maxExtra}};
  if (p.selector == Selector::Sketch)
    j["bits"] = p.sketchBits;
  if (p.tau == abi::kStrictTau)
    j["tau"] = "strict";
  else
    j["tau"] = p.tau;
  if (!p.outputBound)
    j["output_bound"] = false;
  return j;
}

/// Layer or head lists as integers and "a-b" runs of three or more.
nlohmann::json indexListToJSON(const std::vector<int64_t> &v) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1)
      ++j;
    if (j - i >= 2) {
      out.push_back(std::to_string(v[i]) + "-" + std::to_string(v[j]));
    } else {
      for (size_t k = i; k <= j; ++k)
        out.push_back(v[k]);
    }
    i = j + 1;
  }
  return out;
}

} // namespace

std::string scheduleToJSON(const Schedule &schedule) {
  nlohmann::json j = {{"layers", schedule.numLayers},
                      {"default", policyToJSON(schedule.defaultPolicy)}};
  if (schedule.relativeDepth)
    j["depth"] = "relative";
  nlohmann::json rules = nlohmann::json::array();
  for (const ScheduleRule &r : schedule.rules) {
    nlohmann::json rule = {{"layers", indexListToJSON(r.layers)},
                           {"policy", policyToJSON(r.policy)}};
    if (!r.kvHeads.empty())
      rule["kv_heads"] = indexListToJSON(r.kvHeads);
    rules.push_back(rule);
  }
  j["rules"] = rules;
  return j.dump();
}

std::string modelShapeToJSON(const ModelShape &shape) {
  nlohmann::json j = {{"layers", shape.numLayers},
                      {"q_heads", shape.qHeads},
                      {"kv_heads", shape.kvHeads},
                      {"head_dim", shape.headDim},
                      {"page_size", shape.pageSize},
                      {"kv_type", kvTypeName(shape.kvType)},
                      {"scale", shape.effectiveScale()},
                      {"sketch_bits", shape.sketchBits}};
  return j.dump();
}

std::string describeModelJSON(const ModelShape &shape,
                              const Schedule &schedule) {
  nlohmann::json adaptive = nlohmann::json::array();
  for (int64_t l = 0; l < schedule.numLayers; ++l) {
    bool any = false;
    for (int64_t g = 0; g < shape.kvHeads; ++g)
      any |= schedule.policyFor(l, g).adaptive();
    adaptive.push_back(any);
  }
  // Per layer, the window and anchor its prefill function attends in
  // ([0, 0]: dense).
  nlohmann::json prefill = nlohmann::json::array();
  for (int64_t l = 0; l < schedule.numLayers; ++l) {
    const abi::PrefillWindow w = prefillWindowOf(schedule, l, shape.kvHeads);
    prefill.push_back({w.window, w.anchor});
  }
  nlohmann::json stats = nlohmann::json::array();
  for (const char *name : abi::kStatsNames)
    stats.push_back(name);
  nlohmann::json j = {
      {"model", nlohmann::json::parse(modelShapeToJSON(shape))},
      {"schedule", nlohmann::json::parse(scheduleToJSON(schedule))},
      {"summary_rows", abi::summaryRows(shape.pageSize, shape.sketchBits)},
      {"summary_slots",
       {{"k_min", abi::KMin},
        {"k_max", abi::KMax},
        {"k_sum", abi::KSum},
        {"v_min", abi::VMin},
        {"v_max", abi::VMax},
        {"sketch", abi::kSketchRow0}}},
      {"adaptive", adaptive},
      {"prefill_windows", prefill},
      {"stats", stats}};
  return j.dump();
}

Result<KVType> parseKVType(const std::string &name) {
  if (name == "f32")
    return KVType::F32;
  if (name == "f16")
    return KVType::F16;
  if (name == "bf16")
    return KVType::BF16;
  return Status::error("kv_type must be f32, f16 or bf16, got '" + name + "'");
}

namespace {

Result<ModelShape> shapeFromJSON(const nlohmann::json &m) {
  if (!m.is_object())
    return Status::error("'model' must be an object");
  static const std::set<std::string> known = {
      "layers", "q_heads", "kv_heads", "head_dim", "page_size", "kv_type",
      "scale",  "sketch_bits"};
  for (auto it = m.begin(); it != m.end(); ++it)
    if (!known.count(it.key()))
      return Status::error("model: unknown field '" + it.key() + "'");
  ModelShape s;
  for (const char *key : {"layers", "q_heads", "kv_heads", "head_dim"})
    if (!m.contains(key))
      return Status::error(std::string("model: needs '") + key + "'");
  auto layers = getInt(m, "layers", 0, "model");
  auto qHeads = getInt(m, "q_heads", 0, "model");
  auto kvHeads = getInt(m, "kv_heads", 0, "model");
  auto headDim = getInt(m, "head_dim", 0, "model");
  auto pageSize = getInt(m, "page_size", 16, "model");
  auto sketchBits = getInt(m, "sketch_bits", 0, "model");
  for (auto *r : {&layers, &qHeads, &kvHeads, &headDim, &pageSize, &sketchBits})
    if (!r->ok())
      return r->status();
  s.numLayers = *layers;
  s.qHeads = *qHeads;
  s.kvHeads = *kvHeads;
  s.headDim = *headDim;
  s.pageSize = *pageSize;
  s.sketchBits = *sketchBits;
  if (m.contains("kv_type")) {
    if (!m["kv_type"].is_string())
      return Status::error("model: 'kv_type' must be a string");
    auto t = parseKVType(m["kv_type"].get<std::string>());
    if (!t.ok())
      return t.status().withContext("model");
    s.kvType = *t;
  }
  if (m.contains("scale")) {
    if (!m["scale"].is_number())
      return Status::error("model: 'scale' must be a number");
    s.scale = m["scale"].get<float>();
  }
  CONDENSATE_RETURN_IF_ERROR(s.validate().withContext("model"));
  return s;
}

} // namespace

Result<ModelShape> parseModelShapeJSON(const std::string &text) {
  auto j = parseCheckedJSON(text, "model");
  if (!j.ok())
    return j.status();
  return shapeFromJSON(*j);
}

Result<ModelSpec> parseModelSpecJSON(const std::string &text,
                                     const std::string &bufferName) {
  auto parsed = parseCheckedJSON(text, bufferName);
  if (!parsed.ok())
    return parsed.status();
  nlohmann::json j = parsed.take();
  if (!j.is_object())
    return Status::error(bufferName + ": a spec must be a JSON object");
  if (!j.contains("model") || !j.contains("schedule"))
    return Status::error(bufferName + ": a spec needs 'model' and 'schedule'");
  auto shape = shapeFromJSON(j["model"]);
  if (!shape.ok())
    return shape.status().withContext(bufferName);
  auto schedule = parseScheduleJSON(j["schedule"].dump(), shape->numLayers);
  if (!schedule.ok())
    return schedule.status().withContext(bufferName);
  return ModelSpec{*shape, *schedule};
}

} // namespace condensate
