//===- Limits.h - the largest inputs condensate accepts ---------*- C++ -*-===//
//
// Every count, size and index read from a file or a command line is checked
// against these before anything is allocated, expanded or compiled: the
// dialect's verifiers, the runtime's validate() and its JSON and text
// readers all use them. docs/LIMITS.md states them for users. They are far
// above any real model, and low enough that no product or sum of them
// overflows an int64 and no loop over them takes long.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_ABI_LIMITS_H
#define CONDENSATE_ABI_LIMITS_H

#include <cstdint>

namespace condensate::limits {

/// Layers of a model or schedule.
constexpr int64_t kMaxLayers = 1024;
/// Query heads, and key/value heads, of a model.
constexpr int64_t kMaxHeads = 1024;
/// Rules of a schedule.
constexpr int64_t kMaxRules = 1024;
/// Tokens in a policy's anchor, window, window_max and topk, and in the
/// extra units a certificate may add (max_extra times the unit).
constexpr int64_t kMaxPolicyTokens = int64_t(1) << 22; // 4,194,304
/// Indices in a rule's layer or head list (after expanding ranges).
constexpr int64_t kMaxIndexEntries = kMaxLayers;
/// condensate.model ops one module may expand (each becomes a set of
/// compiled functions: a module of thousands is not a program but a stall).
constexpr int64_t kMaxModels = 64;
/// Widths of a model read from a file: hidden size, feed-forward size.
constexpr int64_t kMaxModelWidth = int64_t(1) << 18; // 262,144
/// Vocabulary entries of a model.
constexpr int64_t kMaxVocab = int64_t(1) << 22; // 4,194,304
/// Head dimension (the kernels' limit).
constexpr int64_t kMaxHeadDim = 512;
/// Splits of a sequence's keys (sparse or dense attention) a kernel may be
/// specialised for: each split holds a partial row per query head.
constexpr int64_t kMaxSplits = 4096;
/// Warps (or lane groups) per attention block a kernel may be built with.
constexpr int64_t kMaxAttendWarps = 32;
/// Resident warps per SM the key-sketch scoring kernels may ask ptxas for
/// (sketch-occupancy; 64 warps, 2,048 threads, is an SM's most).
constexpr int64_t kMaxSketchOccupancy = 64;
/// Resident warps per SM the attention kernels may ask ptxas for
/// (attend-occupancy; as sketch-occupancy).
constexpr int64_t kMaxAttendOccupancy = 64;
/// Stages of the tensor-core attention loop's pipeline (attend-stages:
/// tiles in flight a warp, each in shared memory).
constexpr int64_t kMaxAttendStages = 8;

/// Nesting of brackets in a JSON document or an MLIR policy, schedule or
/// model text (arrays, objects, attributes, regions).
constexpr int64_t kMaxNesting = 64;

} // namespace condensate::limits

#endif // CONDENSATE_ABI_LIMITS_H
