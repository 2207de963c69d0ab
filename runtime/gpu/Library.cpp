//===- Library.cpp - kernel libraries and their JSON manifest -------------===//
//
// A GPULibrary on disk is PTX plus a JSON manifest: the launch plan, the
// model shape and schedule (in their JSON form), what each function was
// specialised for and each kernel's parameter list. Reading it needs no
// compiler; every field is checked against the others before a program can
// launch anything from it.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/GPUProgram.h"

#include "condensate/ABI/Limits.h"
#include "condensate/Runtime/Files.h"

#include "condensate/Support/CheckedJSON.h"

namespace condensate {

using nlohmann::json;

Status GPUTuning::validate() const {
  auto inRange = [](const char *name, int64_t v, int64_t max) {
    if (v < 0 || v > max)
      return Status::error(std::string("tuning ") + name + " must be in [0, " +
                           std::to_string(max) + "], got " + std::to_string(v));
    return Status::success();
  };
  CONDENSATE_RETURN_IF_ERROR(
      inRange("dense_splits", denseSplits, limits::kMaxSplits));
  CONDENSATE_RETURN_IF_ERROR(
      inRange("splits", sparseSplits, limits::kMaxSplits));
  CONDENSATE_RETURN_IF_ERROR(
      inRange("attend_warps", attendWarps, limits::kMaxAttendWarps));
  CONDENSATE_RETURN_IF_ERROR(inRange("sketch_occupancy", sketchOccupancy,
                                     limits::kMaxSketchOccupancy));
  CONDENSATE_RETURN_IF_ERROR(inRange("attend_occupancy", attendOccupancy,
                                     limits::kMaxAttendOccupancy));
  return inRange("attend_stages", attendStages, limits::kMaxAttendStages);
}

std::string GPUTuning::options() const {
  return std::string("tensor-cores=") + (tensorCores ? "1" : "0") +
         " dense-splits=" + std::to_string(denseSplits) +
         " splits=" + std::to_string(sparseSplits) +
         " attend-warps=" + std::to_string(attendWarps) +
         " sketch-occupancy=" + std::to_string(sketchOccupancy) +
         " attend-stages=" + std::to_string(attendStages) +
         " attend-occupancy=" + std::to_string(attendOccupancy);
}

std::string GPUTuning::toJSON() const {
  json j = {{"tensor_cores", tensorCores},
            {"dense_splits", denseSplits},
            {"splits", sparseSplits},
            {"attend_warps", attendWarps},
            {"sketch_occupancy", sketchOccupancy},
            {"attend_stages", attendStages},
            {"attend_occupancy", attendOccupancy}};
  return j.dump();
}

Result<GPUTuning> GPUTuning::fromJSON(const std::string &text,
                                      const std::string &what) {
  auto parsed = parseCheckedJSON(text, what);
  if (!parsed.ok())
    return parsed.status();
  const json &j = *parsed;
  if (!j.is_object())
    return Status::error(what + ": must be a JSON object");
  GPUTuning t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &key = it.key();
    if (key == "tensor_cores") {
      if (!it->is_boolean())
        return Status::error(what + ": tensor_cores must be true or false");
      t.tensorCores = it->get<bool>();
      continue;
    }
    int64_t *field = key == "dense_splits"       ? &t.denseSplits
                     : key == "splits"           ? &t.sparseSplits
                     : key == "attend_warps"     ? &t.attendWarps
                     : key == "sketch_occupancy" ? &t.sketchOccupancy
                     : key == "attend_stages"    ? &t.attendStages
                     : key == "attend_occupancy" ? &t.attendOccupancy
                                                 : nullptr;
    if (!field)
      return Status::error(what + ": unknown key '" + key + "'");
    if (!it->is_number_integer())
      return Status::error(what + ": " + key + " must be an integer");
    *field = it->get<int64_t>();
  }
  CONDENSATE_RETURN_IF_ERROR(t.validate().withContext(what));
  return t;
}

std::string GPULibrary::manifestJSON() const {
  json j = json::parse(plan.toJSON());
  j["model"] = json::parse(modelShapeToJSON(shape));
  j["schedule"] = json::parse(scheduleToJSON(schedule));
  j["schedule_mlir"] = schedule.toMLIR();
  j["model_mlir"] = modelText;
  j["specs"] = specs;
  j["tuning"] = json::parse(tuning.toJSON());
  if (!tuningRecord.empty())
    j["tuning_record"] = json::parse(tuningRecord);
  // Per kernel: the parameter list an engine must pass, in order.
  json kernels = json::array();
  for (const auto &[fname, fn] : plan.functions)
    for (const KernelLaunch &l : fn.launches) {
      json params = json::array();
      for (const MemRefParam &p : l.params) {
        int64_t rank = static_cast<int64_t>(p.sizes.size());
        params.push_back({{"memref", p.elementType},
                          {"rank", rank},
                          {"expands_to", "ptr, ptr, i64 offset, " +
                                             std::to_string(rank) +
                                             " x i64 sizes, " +
                                             std::to_string(rank) +
                                             " x i64 strides"}});
      }
      kernels.push_back({{"name", l.kernel},
                         {"function", fname},
                         {"block", l.block},
                         {"shared_bytes", l.sharedBytes},
                         {"params", params}});
    }
  j["kernels"] = kernels;
  return j.dump(1);
}

namespace {

/// The plan must name a function for every layer and the append (and, when
/// it has prefill functions, one for every layer), each with the ABI's
/// argument count, and every argument reference must exist.
Status checkPlan(const LaunchPlan &plan, const ModelShape &shape) {
  if (static_cast<int64_t>(plan.layers.size()) != shape.numLayers)
    return Status::error("the plan has " + std::to_string(plan.layers.size()) +
                         " layers but the model " +
                         std::to_string(shape.numLayers));
  auto check = [&](const std::string &name, int64_t args) -> Status {
    auto it = plan.functions.find(name);
    if (it == plan.functions.end())
      return Status::error("the plan has no function @" + name);
    if (it->second.numArgs != args)
      return Status::error("function @" + name + " takes " +
                           std::to_string(it->second.numArgs) +
                           " arguments, expected " + std::to_string(args));
    for (const KernelLaunch &l : it->second.launches)
      for (const MemRefParam &p : l.params) {
        int64_t limit = p.buffer.kind == BufferRef::Kind::Argument
                            ? args
                            : static_cast<int64_t>(it->second.scratch.size());
        if (p.buffer.index < 0 || p.buffer.index >= limit)
          return Status::error("kernel " + l.kernel +
                               " refers to a buffer that @" + name +
                               " does not have");
      }
    return Status::success();
  };
  for (const std::string &fn : plan.layers)
    CONDENSATE_RETURN_IF_ERROR(check(fn, abi::kAttendArgs));
  CONDENSATE_RETURN_IF_ERROR(check(plan.append, abi::kAppendArgs));
  if (!plan.prefill.empty() &&
      static_cast<int64_t>(plan.prefill.size()) != shape.numLayers)
    return Status::error("the plan has " +
                         std::to_string(plan.prefill.size()) +
                         " prefill layers but the model " +
                         std::to_string(shape.numLayers));
  for (const std::string &fn : plan.prefill) {
    CONDENSATE_RETURN_IF_ERROR(check(fn, abi::kPrefillArgs));
    if (!plan.functions.at(fn).scratch.empty())
      return Status::error("prefill function @" + fn +
                           " needs scratch memory, which the runtime does "
                           "not provide to prefill calls");
  }
  for (int64_t l : plan.adaptive)
    if (l < 0 || l >= shape.numLayers)
      return Status::error("adaptive layer " + std::to_string(l) +
                           " out of range");
  return Status::success();
}

} // namespace

Result<GPULibrary> GPULibrary::fromManifest(const std::string &manifest,
                                            std::string ptx) {
  auto parsed = parseCheckedJSON(manifest, "manifest");
  if (!parsed.ok())
    return parsed.status();
  json j = parsed.take();
  auto plan = LaunchPlan::fromJSON(manifest);
  if (!plan.ok())
    return plan.status();
  if (!j.is_object() || !j.contains("model") || !j.contains("schedule"))
    return Status::error("manifest: needs 'model' and 'schedule'");
  GPULibrary lib;
  lib.plan = *plan;
  lib.chip = plan->target;
  lib.ptx = std::move(ptx);
  auto shape = parseModelShapeJSON(j["model"].dump());
  if (!shape.ok())
    return shape.status().withContext("manifest");
  lib.shape = *shape;
  auto schedule = parseScheduleJSON(j["schedule"].dump(), lib.shape.numLayers);
  if (!schedule.ok())
    return schedule.status().withContext("manifest schedule");
  lib.schedule = *schedule;
  if (j.contains("model_mlir") && j["model_mlir"].is_string())
    lib.modelText = j["model_mlir"].get<std::string>();
  if (j.contains("specs") && j["specs"].is_object())
    for (auto it = j["specs"].begin(); it != j["specs"].end(); ++it)
      if (it->is_string())
        lib.specs[it.key()] = it->get<std::string>();
  // Libraries written before the tuner carry no knobs: the defaults.
  if (j.contains("tuning")) {
    auto tuning = GPUTuning::fromJSON(j["tuning"].dump(), "manifest tuning");
    if (!tuning.ok())
      return tuning.status();
    lib.tuning = *tuning;
  }
  if (j.contains("tuning_record")) {
    if (!j["tuning_record"].is_object())
      return Status::error("manifest: 'tuning_record' must be an object");
    lib.tuningRecord = j["tuning_record"].dump();
  }
  CONDENSATE_RETURN_IF_ERROR(checkPlan(lib.plan, lib.shape).withContext(
      "manifest"));
  if (lib.ptx.find(".entry") == std::string::npos)
    return Status::error("PTX has no kernel entry points");
  for (const auto &[name, fn] : lib.plan.functions)
    for (const KernelLaunch &l : fn.launches)
      if (lib.ptx.find(".entry " + l.kernel + "(") == std::string::npos)
        return Status::error("the PTX has no kernel " + l.kernel +
                             " that the manifest launches");
  return lib;
}

Result<GPULibrary> GPULibrary::load(const std::string &ptxPath,
                                    const std::string &manifestPath) {
  auto manifest = readFile(manifestPath);
  if (!manifest.ok())
    return manifest.status();
  auto ptx = readFile(ptxPath);
  if (!ptx.ok())
    return ptx.status();
  auto lib = fromManifest(*manifest, ptx.take());
  if (!lib.ok())
    return lib.status().withContext(manifestPath);
  return lib;
}

namespace {

/// 90 for "sm_90"; -1 for anything else.
int chipNumber(const std::string &chip) {
  if (chip.size() < 5 || chip.size() > 6 || chip.compare(0, 3, "sm_") != 0)
    return -1;
  int n = 0;
  for (size_t i = 3; i < chip.size(); ++i) {
    if (chip[i] < '0' || chip[i] > '9')
      return -1;
    n = n * 10 + (chip[i] - '0');
  }
  return n;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

/// PREFIX.cubin beside a one-chip library, when it exists and is readable.
std::string cubinBeside(const std::string &prefix) {
  auto cubin = readFile(prefix + ".cubin", int64_t(1) << 30);
  return cubin.ok() ? cubin.take() : std::string();
}

} // namespace

Result<size_t> GPULibrary::chooseImage(const std::vector<std::string> &chips,
                                       int computeCapability, bool *exact) {
  int best = -1;
  size_t bestIndex = 0;
  std::string built;
  for (size_t i = 0; i < chips.size(); ++i) {
    int n = chipNumber(chips[i]);
    if (n < 0)
      return Status::error("unknown chip '" + chips[i] + "'");
    built += (built.empty() ? "" : ", ") + chips[i];
    if (n <= computeCapability && n > best) {
      best = n;
      bestIndex = i;
    }
  }
  if (best < 0)
    return Status::error(
        "the library has kernels for " + (built.empty() ? "no chip" : built) +
        " only; this GPU is sm_" + std::to_string(computeCapability) +
        " (rebuild it with condensate-translate --chip=sm_" +
        std::to_string(computeCapability) + ")");
  if (exact)
    *exact = best == computeCapability;
  return bestIndex;
}

Result<GPULibrary> GPULibrary::loadForDevice(const std::string &manifestPath,
                                             int computeCapability) {
  auto text = readFile(manifestPath, int64_t(1) << 28);
  if (!text.ok())
    return text.status();
  auto parsed = parseCheckedJSON(*text, manifestPath);
  if (!parsed.ok())
    return parsed.status();
  const json &j = *parsed;
  std::string prefix = manifestPath;
  if (prefix.size() > 5 && prefix.compare(prefix.size() - 5, 5, ".json") == 0)
    prefix.resize(prefix.size() - 5);
  if (!j.is_object() || !j.contains("images")) {
    // One chip: PREFIX.json with PREFIX.ptx (and maybe PREFIX.cubin).
    auto ptx = readFile(prefix + ".ptx");
    if (!ptx.ok())
      return ptx.status();
    auto loaded = fromManifest(*text, ptx.take());
    if (!loaded.ok())
      return loaded.status().withContext(manifestPath);
    bool exact = false;
    auto chosen = chooseImage({loaded->chip}, computeCapability, &exact);
    if (!chosen.ok())
      return chosen.status().withContext(manifestPath);
    if (exact)
      loaded->cubin = cubinBeside(prefix);
    return loaded;
  }
  // A fat index: {"images": [{"chip", "manifest", "ptx", "cubin"?}, ...]},
  // paths relative to the index.
  const json &images = j["images"];
  if (!images.is_array() || images.empty() || images.size() > 16)
    return Status::error(manifestPath +
                         ": 'images' must be a list of 1 to 16 entries");
  std::vector<std::string> chips;
  for (const json &im : images) {
    if (!im.is_object() || !im.contains("chip") || !im["chip"].is_string() ||
        !im.contains("manifest") || !im["manifest"].is_string() ||
        !im.contains("ptx") || !im["ptx"].is_string())
      return Status::error(manifestPath + ": every image needs 'chip', "
                                          "'manifest' and 'ptx' strings");
    chips.push_back(im["chip"].get<std::string>());
  }
  bool exact = false;
  auto chosen = chooseImage(chips, computeCapability, &exact);
  if (!chosen.ok())
    return chosen.status().withContext(manifestPath);
  const json &im = images[*chosen];
  std::string dir = directoryOf(manifestPath);
  auto lib = load(dir + im["ptx"].get<std::string>(),
                  dir + im["manifest"].get<std::string>());
  if (!lib.ok())
    return lib.status();
  if (lib->chip != chips[*chosen])
    return Status::error(manifestPath + ": image '" + chips[*chosen] +
                         "' names a manifest for " + lib->chip);
  if (exact && im.contains("cubin") && im["cubin"].is_string()) {
    auto cubin =
        readFile(dir + im["cubin"].get<std::string>(), int64_t(1) << 30);
    if (!cubin.ok())
      return cubin.status();
    lib->cubin = cubin.take();
  }
  return lib;
}

} // namespace condensate
