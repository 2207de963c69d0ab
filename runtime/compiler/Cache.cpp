//===- Cache.cpp - GPU kernel libraries: memory, disk, compiler -----------===//
//
// getGPULibrary: the in-memory cache of compiled libraries, then the disk
// cache (PTX + manifest, keyed by the compiler's identity, the chip, the
// tuning knobs and the model op text), then an in-process compile whose
// result is stored. Unless the caller names knobs, those of the tuning
// record condensate-tune stored for the compiler, chip and model are used.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Files.h"
#include "condensate/Support/CheckedJSON.h"

#include "CompilerId.inc"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace condensate {

std::string defaultCacheDirectory() {
  if (const char *dir = std::getenv("CONDENSATE_CACHE_DIR"))
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"))
    return std::string(xdg) + "/condensate";
  if (const char *home = std::getenv("HOME"))
    return std::string(home) + "/.cache/condensate";
  return "";
}

namespace {

/// FNV-1a: a stable hash of the model text (std::hash is not stable across
/// processes, which a disk cache needs).
uint64_t stableHash(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// The hex name of `key` in the disk cache.
std::string hexKey(const std::string &key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(stableHash(key)));
  return hex;
}

/// The process-wide in-memory cache of compiled libraries.
struct LibraryCache {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const GPULibrary>> libraries;
  static LibraryCache &get() {
    static LibraryCache cache;
    return cache;
  }
};

} // namespace

std::string compilerIdentity() { return CONDENSATE_COMPILER_ID; }

std::string tuningModelText(const ModelShape &shape, const Schedule &schedule) {
  auto full = cacheShapeFor(shape, schedule);
  return modelToMLIR("model", full.ok() ? *full : shape, schedule);
}

std::string tuningRecordKey(const ModelShape &shape, const Schedule &schedule,
                            const std::string &chip) {
  return hexKey(std::string(CONDENSATE_COMPILER_ID) + "\ntuning " + chip +
                "\n" + tuningModelText(shape, schedule));
}

Result<GPUTuning> tuningOfRecord(const std::string &recordJSON) {
  auto parsed = parseCheckedJSON(recordJSON, "tuning record");
  if (!parsed.ok())
    return parsed.status();
  if (!parsed->is_object() || !parsed->contains("best"))
    return Status::error("tuning record: needs 'best'");
  return GPUTuning::fromJSON((*parsed)["best"].dump(), "tuning record best");
}

std::string findTuningRecord(const ModelShape &shape, const Schedule &schedule,
                             const std::string &chip,
                             const std::string &cacheDir) {
  if (cacheDir.empty())
    return "";
  auto text = readFile(cacheDir + "/" + tuningRecordKey(shape, schedule, chip) +
                       ".tune.json");
  if (!text.ok())
    return "";
  auto parsed = parseCheckedJSON(*text, "tuning record");
  if (!parsed.ok() || !parsed->is_object())
    return "";
  const nlohmann::json &j = *parsed;
  auto is = [&](const char *key, const std::string &want) {
    return j.contains(key) && j[key].is_string() &&
           j[key].get<std::string>() == want;
  };
  if (!is("compiler", CONDENSATE_COMPILER_ID) || !is("chip", chip) ||
      !is("model_mlir", tuningModelText(shape, schedule)) ||
      !tuningOfRecord(*text).ok())
    return "";
  return *text;
}

Result<std::shared_ptr<const GPULibrary>>
getGPULibrary(const ModelShape &shape, const Schedule &schedule,
              const GPUCompileOptions &options, GPUCompileReport *report) {
  CONDENSATE_RETURN_IF_ERROR(shape.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  // The model op text spells out the shape, types and schedule; the
  // compiler's identity keeps kernels of an older build out.
  std::string text = modelToMLIR("model", shape, schedule);
  GPUCompileReport local;
  GPUCompileReport &r = report ? *report : local;
  GPUTuning tuning;
  std::string record;
  if (options.tuning) {
    tuning = *options.tuning;
    CONDENSATE_RETURN_IF_ERROR(tuning.validate());
  } else if (const char *env = std::getenv("CONDENSATE_TUNING"); env && *env) {
    // Knobs from the environment (an A/B switch for benchmarks): the JSON
    // of a tuning record's knobs, ahead of any stored record.
    auto knobs = GPUTuning::fromJSON(env, "CONDENSATE_TUNING");
    if (!knobs.ok())
      return knobs.status();
    tuning = *knobs;
  } else {
    record = findTuningRecord(shape, schedule, options.chip, options.cacheDir);
    if (!record.empty())
      tuning = *tuningOfRecord(record);
  }
  r.tuning = tuning;
  r.tuned = !record.empty();
  std::string key = std::string(CONDENSATE_COMPILER_ID) + "\n" + options.chip +
                    " " + tuning.options() + (record.empty() ? "" : " tuned") +
                    "\n" + text;
  std::string hex = hexKey(key);
  r.cacheKey = hex;
  LibraryCache &cache = LibraryCache::get();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.libraries.find(key);
    if (it != cache.libraries.end()) {
      r.source = GPUCompileReport::Source::MemoryCache;
      r.seconds = elapsed();
      return it->second;
    }
  }
  std::shared_ptr<const GPULibrary> lib;
  std::string base =
      options.cacheDir.empty() ? "" : options.cacheDir + "/" + hex;
  if (!base.empty()) {
    auto loaded = GPULibrary::load(base + ".ptx", base + ".json");
    // A missing, stale or damaged entry is ignored and rebuilt.
    if (loaded.ok() && loaded->modelText == text && loaded->tuning == tuning &&
        loaded->tuningRecord.empty() == record.empty()) {
      lib = std::make_shared<const GPULibrary>(loaded.take());
      r.source = GPUCompileReport::Source::DiskCache;
    }
  }
  if (!lib) {
    auto compiled = compileGPULibrary(shape, schedule, options.chip, tuning);
    if (!compiled.ok())
      return compiled.status();
    compiled->tuningRecord = record;
    lib = std::make_shared<const GPULibrary>(compiled.take());
    r.source = GPUCompileReport::Source::Compiled;
    if (!base.empty() && makeDirectories(options.cacheDir).ok()) {
      // The disk cache is best effort: a failed write only costs a compile.
      (void)writeFileAtomic(base + ".ptx", lib->ptx);
      (void)writeFileAtomic(base + ".json", lib->manifestJSON());
    }
  }
  r.seconds = elapsed();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.libraries.emplace(key, lib);
  return lib;
}

} // namespace condensate
