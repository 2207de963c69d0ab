// The condensate-to-cpu pipeline on the shipped examples: a model schedule
// becomes LLVM dialect only, one llvm.func (and its _mlir_ciface_ wrapper)
// per distinct layer and one for the append, and the layer table survives as
// a module attribute for the runtime.
//
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/paper.mlir | FileCheck %s --check-prefix=PAPER
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/paper.mlir | FileCheck %s --check-prefix=ONLY
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/paper.mlir | FileCheck %s --check-prefix=PAPER-N
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/streaming_llm.mlir | FileCheck %s --check-prefix=SLLM
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/streaming_llm.mlir | FileCheck %s --check-prefix=ONLY
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/streaming_llm.mlir | FileCheck %s --check-prefix=SLLM-N
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/quest.mlir | FileCheck %s --check-prefix=QUEST
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/quest.mlir | FileCheck %s --check-prefix=ONLY
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/quest.mlir | FileCheck %s --check-prefix=QUEST-N
// RUN: condensate-opt --condensate-to-cpu %S/Inputs/certified_minmax.mlir | FileCheck %s --check-prefix=CERT
// RUN: condensate-opt --condensate-to-cpu %S/Inputs/certified_minmax.mlir | FileCheck %s --check-prefix=ONLY
// RUN: condensate-opt --condensate-to-cpu %S/Inputs/certified_minmax.mlir | FileCheck %s --check-prefix=CERT-N
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/certified.mlir | FileCheck %s --check-prefix=SKETCH
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/certified.mlir | FileCheck %s --check-prefix=ONLY
// RUN: condensate-opt --condensate-to-cpu %S/../../examples/certified.mlir | FileCheck %s --check-prefix=SKETCH-N
// The pipeline also takes a bare (unspecialised) decode attention.
// RUN: condensate-opt --condensate-to-cpu %s | FileCheck %s --check-prefix=BARE
// RUN: condensate-opt --condensate-to-cpu %s | FileCheck %s --check-prefix=ONLY

// Nothing but LLVM dialect ops (and the module) is left.
// ONLY-NOT: {{(^ *|= |")(arith|scf|memref|vector|math|func|cf|condensate|affine|index|ub)\.[a-z_]+}}
// ONLY-NOT: unrealized_conversion_cast

// PAPER: module attributes {condensate.layer_tables = {paper = {adaptive = array<i64: 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29>, append = @paper_append, layers = [@paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer0, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer15, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8, @paper_layer8], prefill = [@paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill, @paper_prefill]}}}
// PAPER-DAG: llvm.func @paper_layer0(
// PAPER-DAG: llvm.func @_mlir_ciface_paper_layer0(
// PAPER-DAG: llvm.func @paper_layer8(
// PAPER-DAG: llvm.func @_mlir_ciface_paper_layer8(
// PAPER-DAG: llvm.func @paper_layer15(
// PAPER-DAG: llvm.func @_mlir_ciface_paper_layer15(
// PAPER-DAG: llvm.func @paper_prefill(
// PAPER-DAG: llvm.func @_mlir_ciface_paper_prefill(
// PAPER-DAG: llvm.func @paper_append(
// PAPER-DAG: llvm.func @_mlir_ciface_paper_append(
// PAPER-DAG: llvm.call @paper_layer8(
// PAPER-DAG: llvm.intr.exp
// 5 functions, 5 wrappers, malloc and free.
// PAPER-N-COUNT-12: llvm.func
// PAPER-N-NOT: llvm.func

// SLLM: module attributes {condensate.layer_tables = {streaming_llm = {adaptive = array<i64>, append = @streaming_llm_append, layers = [@streaming_llm_layer0, @streaming_llm_layer0,
// SLLM-DAG: llvm.func @streaming_llm_layer0(
// SLLM-DAG: llvm.func @_mlir_ciface_streaming_llm_layer0(
// SLLM-DAG: llvm.func @streaming_llm_append(
// SLLM-DAG: llvm.func @_mlir_ciface_streaming_llm_append(
// A window policy prefills in its window, anchor kept.
// SLLM-DAG: llvm.func @streaming_llm_prefill_w508_a4(
// SLLM-DAG: llvm.func @_mlir_ciface_streaming_llm_prefill_w508_a4(
// SLLM-N-COUNT-8: llvm.func
// SLLM-N-NOT: llvm.func

// QUEST: module attributes {condensate.layer_tables = {quest = {adaptive = array<i64>, append = @quest_append, layers = [@quest_layer0, @quest_layer0, @quest_layer2, @quest_layer2,
// QUEST-DAG: llvm.func @quest_layer0(
// QUEST-DAG: llvm.func @_mlir_ciface_quest_layer0(
// QUEST-DAG: llvm.func @quest_layer2(
// QUEST-DAG: llvm.func @_mlir_ciface_quest_layer2(
// QUEST-DAG: llvm.func @quest_prefill(
// QUEST-DAG: llvm.func @quest_append(
// QUEST-DAG: llvm.func @_mlir_ciface_quest_append(
// QUEST-N-COUNT-10: llvm.func
// QUEST-N-NOT: llvm.func

// Layers 0..3 carry the per-head override; 4..29 the certified default.
// CERT: module attributes {condensate.layer_tables = {certified = {adaptive = array<i64>, append = @certified_append, layers = [@certified_layer0, @certified_layer0, @certified_layer0, @certified_layer0, @certified_layer4, @certified_layer4,
// CERT-DAG: llvm.func @certified_layer0(
// CERT-DAG: llvm.func @_mlir_ciface_certified_layer0(
// CERT-DAG: llvm.func @certified_layer4(
// CERT-DAG: llvm.func @_mlir_ciface_certified_layer4(
// CERT-DAG: llvm.func @certified_append(
// CERT-DAG: llvm.func @_mlir_ciface_certified_append(
// The certificate's f64 arithmetic survives to LLVM.
// CERT-DAG: llvm.fpext %{{.*}} : f32 to f64
// CERT-N-COUNT-10: llvm.func
// CERT-N-NOT: llvm.func

// The certified sketch example: one layer function for all 30 layers; the
// append writes 4-bit sketches (two word rows after the 5 summary rows).
// SKETCH: module attributes {condensate.layer_tables = {certified = {adaptive = array<i64>, append = @certified_append, layers = [@certified_layer0, @certified_layer0,
// SKETCH-DAG: llvm.func @certified_layer0(
// SKETCH-DAG: llvm.func @_mlir_ciface_certified_layer0(
// SKETCH-DAG: llvm.func @certified_prefill(
// SKETCH-DAG: llvm.func @certified_append(
// SKETCH-DAG: llvm.func @_mlir_ciface_certified_append(
// SKETCH-DAG: llvm.intr.floor
// SKETCH-DAG: llvm.lshr
// SKETCH-N-COUNT-8: llvm.func
// SKETCH-N-NOT: llvm.func

// BARE-NOT: condensate.layer_tables
// BARE: llvm.func @bare(
// BARE-NOT: _mlir_ciface_bare
func.func @bare(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %s: memref<?x2x5x16xf32>, %o: memref<?x4x16xf32>) {
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) summaries(%s : memref<?x2x5x16xf32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.policy<window = 32, topk = 32>, scale = 0.25 : f32}
  return
}
