//===- TestSchedules.h - shapes and schedules the suites share --*- C++ -*-===//
//
// One layer per policy kind (dense, window, exact top-k, block min/max,
// block mean, certified with extras, strict certificate, adaptive window,
// certified block mean, loose token and page certificates, key sketches,
// certified sketches with and without the output bound) plus a layer with
// per-head overrides. The loose certificates pass with positions left
// out, so their output-error bounds hold against real errors.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_TEST_TESTSCHEDULES_H
#define CONDENSATE_TEST_TESTSCHEDULES_H

#include "condensate/Runtime/Policy.h"

#include <sstream>
#include <string>
#include <vector>

namespace condensate::test {

struct Config {
  int64_t headDim, kvHeads, group, pageSize;
  KVType kvType;
};

inline std::string name(const Config &c) {
  std::ostringstream os;
  os << "d" << c.headDim << "_kv" << c.kvHeads << "_g" << c.group << "_p"
     << c.pageSize << "_" << kvTypeName(c.kvType);
  return os.str();
}

inline Policy policy(int64_t anchor, int64_t window, int64_t topk, Selector sel,
              int64_t page) {
  Policy p;
  p.anchor = anchor;
  p.window = p.windowMax = window;
  p.topk = topk;
  p.selector = sel;
  p.pageSize = page;
  return p;
}

/// Whether any of a layer's key/value-head policies ranks by key sketches.
inline bool usesSketch(const std::vector<Policy> &kv) {
  for (const Policy &p : kv)
    if (!p.dense && p.selector == Selector::Sketch)
      return true;
  return false;
}

/// Whether a layer's float64 ties of ranking keys are ties on every target
/// too: not where a key/value-head policy ranks by key sketches (float
/// sums each target rounds its own way) or relative to each head of a
/// group (a difference each target rounds).
inline bool exactTiesHold(const std::vector<Policy> &kv, int64_t group) {
  for (const Policy &p : kv)
    if (!p.dense && (p.selector == Selector::Sketch || p.ranksRelative(group)))
      return false;
  return true;
}

/// One layer per policy kind, plus a layer with per-head overrides.
inline Schedule testSchedule(const Config &c, std::vector<std::vector<Policy>> &perLayer) {
  int64_t P = c.pageSize;
  std::vector<Policy> kinds;
  kinds.push_back(Policy::makeDense());
  kinds.push_back(policy(1, 16, 0, Selector::BlockMinMax, P));
  kinds.push_back(policy(1, 8, 13, Selector::Exact, P));
  kinds.push_back(policy(2, 16, 3 * P, Selector::BlockMinMax, P));
  kinds.push_back(policy(1, 16, 2 * P, Selector::BlockMean, P));
  Policy cert = policy(1, 8, 2 * P, Selector::BlockMinMax, P);
  cert.tau = 1e-3;
  cert.maxExtra = 3;
  kinds.push_back(cert);
  Policy strict = policy(1, 4, 8, Selector::Exact, P);
  strict.tau = condensate::abi::kStrictTau;
  strict.maxExtra = 16;
  kinds.push_back(strict);
  Policy adaptive = policy(1, 8, 8, Selector::Exact, P);
  adaptive.windowMax = 40;
  kinds.push_back(adaptive);
  Policy certMean = policy(1, 8, P, Selector::BlockMean, P);
  certMean.tau = 1e-2;
  certMean.maxExtra = 2;
  kinds.push_back(certMean);
  Policy looseExact = policy(1, 8, 2 * P, Selector::Exact, P);
  looseExact.tau = 0.5;
  looseExact.maxExtra = 4;
  kinds.push_back(looseExact);
  Policy loosePage = policy(1, 8, 2 * P, Selector::BlockMinMax, P);
  loosePage.tau = 0.5;
  loosePage.maxExtra = 2;
  kinds.push_back(loosePage);
  // Key sketches: 2, 4 or 8 bits by configuration (one width a schedule;
  // the GPU's two shapes with tensor-core sketch scoring, d128_kv8_g4_p64
  // and d128_kv2_g7_p64, take 4 bits).
  const int64_t bits = int64_t(2) << ((c.headDim / 64 + c.pageSize / 16 +
                                       c.kvHeads + 2 * c.group) % 3);
  Policy sketch = policy(1, 8, 2 * P + 5, Selector::Sketch, P);
  sketch.sketchBits = bits;
  kinds.push_back(sketch);
  Policy certSketch = policy(1, 8, P, Selector::Sketch, P);
  certSketch.sketchBits = bits;
  certSketch.tau = 1e-3;
  // Many extras: open on the shorter test contexts (the walk takes in
  // what it needs and stops), capped on the longer ones; past 64 slots the
  // GPU certify starts from chunk sums and marks the extras it took in
  // shared memory, and up to 1024 the GPU select ranks them in shared
  // memory (more are ranked a list of 1024 at a time).
  certSketch.maxExtra = 1000;
  kinds.push_back(certSketch);
  // The same certificate bounding the omitted mass alone (output_bound =
  // false: the value box is not gathered, stats column 4 stays NaN), at a
  // tolerance that passes with positions left out.
  Policy massOnly = certSketch;
  massOnly.tau = 0.2;
  massOnly.outputBound = false;
  kinds.push_back(massOnly);

  Schedule s;
  s.numLayers = static_cast<int64_t>(kinds.size()) + 1;
  s.defaultPolicy = kinds[0];
  perLayer.clear();
  for (size_t l = 0; l < kinds.size(); ++l) {
    s.rules.push_back({{static_cast<int64_t>(l)}, {}, kinds[l]});
    perLayer.push_back(std::vector<Policy>(c.kvHeads, kinds[l]));
  }
  // Per-head overrides on the last layer: head 0 dense, others min/max.
  int64_t last = s.numLayers - 1;
  s.rules.push_back({{last}, {}, kinds[3]});
  s.rules.push_back({{last}, {0}, kinds[0]});
  std::vector<Policy> mixed(c.kvHeads, kinds[3]);
  mixed[0] = kinds[0];
  perLayer.push_back(mixed);
  return s;
}


} // namespace condensate::test

#endif // CONDENSATE_TEST_TESTSCHEDULES_H
