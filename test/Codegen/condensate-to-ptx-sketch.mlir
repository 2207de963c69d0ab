// The sketch selector's scoring through NVPTX: with a group of 7 query heads
// (Qwen2.5's) it runs on tensor cores, codes turned into bf16 by a byte
// permute (shared by a byte's two tokens), a shift and one lop3 and
// multiplied by mma.sync; without
// tensor cores (or with a group of 3 or less) on CUDA cores, one fma per
// code and head.
// RUN: condensate-opt --condensate-to-ptx %s > %t.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.ptx
// RUN: condensate-opt --condensate-to-ptx="tensor-cores=0" %s > %t.nomma.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.nomma.mlir > %t.nomma.ptx
// RUN: FileCheck %s --check-prefix=NOMMA --input-file=%t.nomma.ptx
// The sketch-occupancy knob (docs/TUNING.md) sets the scoring kernels'
// launch bounds, on tensor cores and on CUDA cores: 24 resident warps are
// 3 blocks of 256 threads; out of range is refused.
// RUN: condensate-opt --condensate-to-ptx="sketch-occupancy=24" %s > %t.occ.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.occ.mlir > %t.occ.ptx
// RUN: FileCheck %s --check-prefix=OCC --input-file=%t.occ.ptx
// RUN: condensate-opt --condensate-to-ptx="sketch-occupancy=24 tensor-cores=0" %s > %t.occ.nomma.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.occ.nomma.mlir > %t.occ.nomma.ptx
// RUN: FileCheck %s --check-prefix=OCCNOMMA --input-file=%t.occ.nomma.ptx
// RUN: not condensate-opt --condensate-to-ptx="sketch-occupancy=65" %s 2>&1 | FileCheck %s --check-prefix=BADOCC
// OCC-LABEL: .visible .entry qwen_layer0_score_sketch(
// OCC: .maxntid 256, 1, 1
// OCC: .minnctapersm 3
// OCCNOMMA-LABEL: .visible .entry qwen_layer0_score_sketch(
// OCCNOMMA: .maxntid 256, 1, 1
// OCCNOMMA: .minnctapersm 3
// OCCNOMMA-NOT: mma.sync
// BADOCC: error: sketch-occupancy must be in [0, 64], got 65

condensate.model @qwen layers = 1, q_heads = 14, kv_heads = 2, head_dim = 64,
    page_size = 64, kv_type = bf16,
    schedule = #condensate.schedule<layers = 1,
      default = #condensate.policy<anchor = 1, window = 64, topk = 960,
        selector = sketch, bits = 4, page_size = 64>, rules = []>

// PTX-LABEL: .visible .entry qwen_layer0_score_sketch(
// PTX: .maxntid 256, 1, 1
// PTX: .minnctapersm 4
// PTX: ld.global.v4.b32
// PTX: prmt.b32 [[P:%r[0-9]+]], %r{{[0-9]+}}, %r{{[0-9]+}}, 0x4400U;
// PTX-NEXT: shl.b32 %r{{[0-9]+}}, [[P]], 3;
// PTX: lop3.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, 234;
// PTX: shr.u32 %r{{[0-9]+}}, [[P]], 1;
// PTX: lop3.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, 234;
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX: shfl.sync.idx.b32
// PTX-LABEL: .visible .entry qwen_layer0_select_topk_clear(
// The prefilter's count: the last block of a sequence (a counter bumped
// after a fence) finds the threshold bin.
// PTX-LABEL: .visible .entry qwen_layer0_select_topk_count(
// PTX: atom.global.add.u32
// PTX: membar.gl;
// PTX: atom.global.add.u32
// PTX: membar.gl;
// PTX-LABEL: .visible .entry qwen_layer0_select_topk_compact(
// NOMMA-LABEL: .visible .entry qwen_layer0_score_sketch(
// NOMMA-NOT: mma.sync
// NOMMA: fma.rn.f32
// NOMMA-LABEL: .visible .entry qwen_layer0_select_topk_clear(
