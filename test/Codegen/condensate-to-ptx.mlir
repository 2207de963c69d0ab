// The condensate-to-ptx pipeline on a small model: host functions keep the
// launch plan (allocs and gpu.launch_func), the kernels end up as PTX text in
// one gpu.binary. No GPU is needed. The PTX is stored escaped in the
// binary's `assembly` string; sed turns it back into lines.
//
// RUN: condensate-opt --condensate-to-ptx %s > %t.sm90.mlir
// RUN: FileCheck %s --check-prefix=HOST --input-file=%t.sm90.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.sm90.mlir > %t.sm90.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t.sm90.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL --input-file=%t.sm90.ptx
// RUN: %if libdevice %{ FileCheck %s --check-prefix=EXP --input-file=%t.sm90.ptx %}
// The tuning knobs (docs/TUNING.md) reach the kernels: dense splits size
// the dense partials and grid, splits the sparse grid, attend-warps the
// attention blocks; out-of-range values are refused.
// RUN: condensate-opt --condensate-to-ptx="dense-splits=24 splits=3 attend-warps=2" %s | FileCheck %s --check-prefix=KNOBS
// RUN: not condensate-opt --condensate-to-ptx="dense-splits=4097" %s 2>&1 | FileCheck %s --check-prefix=BADSPLITS
// RUN: not condensate-opt --condensate-to-ptx="attend-warps=33" %s 2>&1 | FileCheck %s --check-prefix=BADWARPS
// RUN: not condensate-opt --condensate-to-ptx="splits=5000" %s 2>&1 | FileCheck %s --check-prefix=BADSPARSE
// RUN: not condensate-opt --condensate-to-ptx="attend-stages=9" %s 2>&1 | FileCheck %s --check-prefix=BADSTAGES
// attend-occupancy=12: the attention kernels' launch bounds ask for 12
// resident warps an SM, 3 blocks of 4 warps; out of range is refused.
// RUN: condensate-opt --condensate-to-ptx="attend-occupancy=12" %s > %t.occ.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.occ.mlir > %t.occ.ptx
// RUN: FileCheck %s --check-prefix=OCC --input-file=%t.occ.ptx
// RUN: FileCheck %s --check-prefix=OCCHOST --input-file=%t.occ.mlir
// RUN: not condensate-opt --condensate-to-ptx="attend-occupancy=65" %s 2>&1 | FileCheck %s --check-prefix=BADOCC
// attend-stages=3: the tensor-core attention copies its rows into a ring
// of 3 tiles a warp by cp.async, waits for a tile two iterations later and
// reads it back from shared memory.
// RUN: condensate-opt --condensate-to-ptx="attend-stages=3" %s > %t.ring.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.ring.mlir > %t.ring.ptx
// RUN: FileCheck %s --check-prefix=RINGPTX --input-file=%t.ring.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL --input-file=%t.ring.ptx
// RUN: condensate-opt --condensate-to-ptx="chip=sm_80" %s > %t.sm80.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.sm80.mlir > %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t.sm80.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL --input-file=%t.sm80.ptx
// RUN: %if libdevice %{ FileCheck %s --check-prefix=EXP --input-file=%t.sm80.ptx %}
// With tensor cores off (the pass option) attention runs on lane groups of
// CUDA cores.
// RUN: condensate-opt --condensate-to-ptx="tensor-cores=0" %s > %t.nomma.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.nomma.mlir > %t.nomma.ptx
// RUN: FileCheck %s --check-prefix=NOMMA --input-file=%t.nomma.ptx
// RUN: FileCheck %s --check-prefix=NOLOCAL --input-file=%t.nomma.ptx

// Layer 0: certified block top-k (score, select, sparse, certify, extra
// pages, dense fallback, merge); layer 1: dense; layer 2: exact top-k with
// an adaptive window.
condensate.model @tiny layers = 3, q_heads = 8, kv_heads = 2, head_dim = 64,
    page_size = 16, kv_type = bf16,
    schedule = #condensate.schedule<layers = 3,
      default = #condensate.policy<window = 64, topk = 64, tau = 1.0e-3,
                                   max_extra = 2>,
      rules = [#condensate.rule<layers = [1], policy = #condensate.dense>,
               #condensate.rule<layers = [2],
                 policy = #condensate.policy<window = 32, window_max = 128,
                                             topk = 48, selector = exact>>]>

// HOST: module attributes {condensate.layer_tables = {tiny = {adaptive = array<i64: 2>, append = @tiny_append, layers = [@tiny_layer0, @tiny_layer1, @tiny_layer2], prefill = [@tiny_prefill, @tiny_prefill, @tiny_prefill]}}, gpu.container_module} {
// HOST-LABEL: func.func @tiny_layer0(
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_score_pages blocks in (%{{.*}}, %c2, %[[B:.*]]) threads in (%c256, %c1, %c1)
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_select_topk blocks in (%c2, %[[B]], %c1) threads in (%c1024, %c1, %c1)
// The sparse grid's x: the splits the batch needs for about 256 blocks,
// ceil(256 / (batch x 2 kv heads)), at most the list's 5.
// HOST: %[[ROWS:.*]] = arith.muli %[[B]], %c2 : index
// HOST: %[[ROWS1:.*]] = arith.maxsi %[[ROWS]], %c1 : index
// HOST: %[[WANT:.*]] = arith.ceildivsi %c256, %[[ROWS1]] : index
// HOST: %[[LIVE:.*]] = arith.minsi %[[WANT]], %c5 : index
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_sparse_attend blocks in (%[[LIVE]], %c2, %[[B]]) threads in (%c128, %c1, %c1)
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_certify blocks in (%c2, %[[B]], %c1) threads in (%c256, %c1, %c1)
// HOST: %[[LIVE0:.*]] = arith.minsi %[[WANT]], %c1 : index
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_sparse_attend_0 blocks in (%[[LIVE0]], %c2, %[[B]]) threads in (%c128, %c1, %c1)
// The dense fallback's grid x: the splits the batch needs for about 512
// blocks, at most its split count (the GPU default; see
// condensate-decompose.mlir).
// HOST: %[[PO:.*]] = memref.alloc(%[[B]]) : memref<?x8x[[DS:[0-9]+]]x64xf32>
// HOST: %[[DWANT:.*]] = arith.ceildivsi %c512, %[[ROWS1]] : index
// HOST: %[[DLIVE:.*]] = arith.minsi %[[DWANT]], %c[[DS]] : index
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_dense_attend blocks in (%[[DLIVE]], %c2, %[[B]]) threads in (%c128, %c1, %c1)
// Its merge: 16 warps, one round of 16 splits each over the 256 splits.
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer0_merge blocks in (%{{.*}}, %c1, %c1) threads in (%c512, %c1, %c1)
// KNOBS-LABEL: func.func @tiny_layer0(
// KNOBS: %[[KLIVE:.*]] = arith.minsi %{{.*}}, %c3 : index
// KNOBS: gpu.launch_func @condensate_kernels::@tiny_layer0_sparse_attend blocks in (%[[KLIVE]], %c2, %{{.*}}) threads in (%c64, %c1, %c1)
// KNOBS: memref.alloc(%{{.*}}) : memref<?x8x24x64xf32>
// KNOBS: %[[KDLIVE:.*]] = arith.minsi %{{.*}}, %c24 : index
// KNOBS: gpu.launch_func @condensate_kernels::@tiny_layer0_dense_attend blocks in (%[[KDLIVE]], %c2, %{{.*}}) threads in (%c64, %c1, %c1)
// BADSPLITS: error: dense-splits must be in [0, 4096], got 4097
// BADWARPS: error: attend-warps must be in [0, 32], got 33
// BADSPARSE: error: 'condensate.decode_attention' op spec splits must be in [1, 4096], got 5000
// BADSTAGES: error: attend-stages must be in [0, 8], got 9
// OCC-LABEL: .visible .entry tiny_layer0_sparse_attend(
// OCC: .maxntid 128, 1, 1
// OCC: .minnctapersm 3
// OCC-LABEL: .visible .entry tiny_layer0_dense_attend(
// OCC: .maxntid 128, 1, 1
// OCC: .minnctapersm 3
// With 3 blocks an SM resident, a dense launch aims for one wave of
// 3 x 128 blocks (denseBlockTarget); from 128 (sequence, kv head) pairs,
// for 512 blocks (denseLiveSplits).
// OCCHOST-LABEL: func.func @tiny_layer1(
// OCCHOST: arith.ceildivsi %c384, %{{.*}} : index
// OCCHOST: arith.ceildivsi %c512, %{{.*}} : index
// OCCHOST: arith.addi %{{.*}}, %c-127 : index
// OCCHOST: gpu.launch_func @condensate_kernels::@tiny_layer1_dense_attend
// BADOCC: error: attend-occupancy must be in [0, 64], got 65
// RINGPTX-LABEL: .visible .entry tiny_layer0_sparse_attend(
// RINGPTX-DAG: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
// RINGPTX-DAG: cp.async.commit_group;
// RINGPTX-DAG: cp.async.wait_group 2;
// RINGPTX-DAG: ld.shared.v4.b32
// RINGPTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// RINGPTX-LABEL: .visible .entry tiny_layer0_dense_attend(
// RINGPTX-DAG: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
// RINGPTX-DAG: cp.async.wait_group 2;
// HOST-LABEL: func.func @tiny_layer1(
// HOST: %[[DLIVE1:.*]] = arith.minsi %{{.*}}, %c[[DS]] : index
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer1_dense_attend blocks in (%[[DLIVE1]], %c2, %{{.*}}) threads in (%c128, %c1, %c1)
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer1_merge
// HOST-LABEL: func.func @tiny_layer2(
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_score_tokens
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_select_topk_clear
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_select_topk_count
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_select_topk_compact
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_select_topk {{.*}} args({{.*}}, %arg5 : memref<?xi32>, {{.*}})
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_sparse_attend
// HOST: gpu.launch_func @condensate_kernels::@tiny_layer2_merge
// HOST-LABEL: func.func @tiny_append(
// HOST: gpu.launch_func @condensate_kernels::@tiny_append_append_kv
// Every gpu.module became the binary.
// HOST-NOT: gpu.module
// HOST: gpu.binary @condensate_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80"{{.*}}>, properties = {{.*}}, assembly = "//\0A// Generated by LLVM NVPTX Back-End
// HOST-NOT: gpu.module
// HOST-NOT: condensate.

// PTX: .version 8.0
// PTX-NEXT: .target sm_90
// PTX-NEXT: .address_size 64
// Page scores: 16-byte summary loads, xor shuffles over 16-lane groups.
// PTX-LABEL: .visible .entry tiny_layer0_score_pages(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 8, 31, -1;
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// Top-k: shared-memory histograms by atomics, block barriers, warp sums.
// PTX-LABEL: .visible .entry tiny_layer0_select_topk(
// PTX-DAG: atom.shared.add.u32
// PTX-DAG: bar.sync 0;
// PTX-DAG: shfl.sync.bfly.b32
// Attention on bf16 tensor cores: 16-byte row loads, mma.sync m16n8k16
// (query and weights split into bf16 hi + lo); a group of 4 runs both
// products transposed (shuffles over a column's lanes for each head's
// maximum, movmatrix for P^T), a combine through shared memory.
// PTX-LABEL: .visible .entry tiny_layer0_sparse_attend(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// PTX-DAG: movmatrix.sync.aligned.m8n8.trans.b16
// PTX-DAG: bar.sync 0;
// PTX-LABEL: .visible .entry tiny_layer0_certify(
// PTX-DAG: atom.shared.add.f64
// PTX-DAG: bar.sync 0;
// PTX-LABEL: .visible .entry tiny_layer0_sparse_attend_0(
// PTX-DAG: ld.global.v4.b32
// PTX-LABEL: .visible .entry tiny_layer0_dense_attend(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: bar.sync 0;
// Merge: a warp per row, warp-wide max.
// PTX-LABEL: .visible .entry tiny_layer0_merge(
// PTX-DAG: shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// PTX-LABEL: .visible .entry tiny_layer1_dense_attend(
// PTX-DAG: ld.global.v4.b32
// PTX-LABEL: .visible .entry tiny_layer1_merge(
// PTX-LABEL: .visible .entry tiny_layer2_score_tokens(
// PTX-DAG: ld.global.v4.b32
// PTX-DAG: shfl.sync.bfly.b32
// PTX-LABEL: .visible .entry tiny_layer2_select_topk(
// PTX-DAG: atom.shared.add.u32
// PTX-LABEL: .visible .entry tiny_layer2_sparse_attend(
// PTX-DAG: ld.global.v4.b32
// PTX-LABEL: .visible .entry tiny_layer2_merge(
// PTX-LABEL: .visible .entry tiny_append_append_kv(
// PTX-DAG: cvt.rn.bf16.f32
// PTX-DAG: st.global.b16
// PTX-NOT: .entry

// With libdevice linked (CUDA_ROOT, CUDA_HOME or CUDA_PATH naming a toolkit)
// the softmax exponentials are fast ex2.approx instructions and no call to
// libdevice is left unresolved.
// EXP-NOT: .extern .func
// EXP-LABEL: .visible .entry {{.*}}_layer0_sparse_attend(
// EXP: ex2.approx.f32
// EXP-LABEL: .visible .entry {{.*}}_layer0_certify(
// EXP: ex2.approx
// EXP-LABEL: .visible .entry {{.*}}_layer0_dense_attend(
// EXP: ex2.approx.f32
// EXP-LABEL: .visible .entry {{.*}}_layer0_merge(
// EXP: ex2.approx.f32
// EXP-LABEL: .visible .entry {{.*}}_layer2_sparse_attend(
// EXP: ex2.approx.f32
// EXP-NOT: __nv_

// No kernel spills to local memory.
// NOLOCAL-NOT: .local
// NOLOCAL-NOT: __local_depot

// Lane groups of 8 lanes, 16-byte bf16 row loads, no mma anywhere.
// NOMMA-NOT: mma.sync
// NOMMA-LABEL: .visible .entry tiny_layer0_sparse_attend(
// NOMMA-DAG: ld.global.v4.b32
// NOMMA-DAG: shfl.sync.bfly.b32 {{.*}}, 4, 31, -1;
// NOMMA-DAG: bar.sync 0;
// NOMMA-NOT: mma.sync

// SM80: gpu.binary @condensate_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80"{{.*}}>
// SM80: .target sm_80
// SM80-NOT: .target
// SM80: .visible .entry tiny_layer0_sparse_attend(
// SM80: ld.global.v4.b32
// SM80: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// SM80: .visible .entry tiny_append_append_kv(
