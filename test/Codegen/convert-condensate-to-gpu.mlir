// convert-condensate-to-gpu: every stage op becomes a `kernel` gpu.func in
// one gpu.module and a gpu.launch_func in its host function. No GPU is
// needed: the checks read the thread mapping off the IR.
// The main checks leave out programmatic dependent launch (checked under
// GRIDDEP, on by default for sm_90).
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu=grid-dependency=0 -verify-diagnostics | FileCheck %s
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu -verify-diagnostics | FileCheck %s --check-prefix=GRIDDEP
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu="module-name=attn" -verify-diagnostics | FileCheck %s --check-prefix=NAME
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu -verify-diagnostics | FileCheck %s --check-prefix=NONE
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu=chip=sm_80 -verify-diagnostics | FileCheck %s --check-prefix=SM80
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu=chip=sm_61 -verify-diagnostics | FileCheck %s --check-prefix=OLD
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu="tensor-cores=0 grid-dependency=0" -verify-diagnostics | FileCheck %s --check-prefix=NOMMA
// RUN: condensate-opt %s -split-input-file --convert-condensate-to-gpu="attend-stages=4 grid-dependency=0" -verify-diagnostics | FileCheck %s --check-prefix=RING

// select_topk's key cache is what the chip lets a block claim beside its
// 2464 static bytes: 156 KB on sm_80 (39936 keys), the 48 KB every chip
// allows on one this table does not know (11264 keys).
// SM80: gpu.launch_func @condensate_kernels::@select_topk_select_topk {{.*}} dynamic_shared_memory_size %c159744_i32
// SM80: memref<39936xi32, #gpu.address_space<workgroup>>
// OLD: gpu.launch_func @condensate_kernels::@select_topk_select_topk {{.*}} dynamic_shared_memory_size %c45056_i32
// OLD: memref<11264xi32, #gpu.address_space<workgroup>>
// Tensor cores from sm_80 on, and only when the option leaves them on.
// SM80: gpu.module @condensate_kernels attributes {{{.*}}condensate.tensor_cores}
// OLD-NOT: condensate.tensor_cores
// NOMMA-NOT: condensate.tensor_cores

// Programmatic dependent launch (sm_90 and later): the module, each kernel
// and each launch carry condensate.grid_dependency (the launch plan's
// grid_dependency), and each kernel first waits for the grids before it,
// then lets the next one launch. Not before sm_90.
// GRIDDEP: gpu.launch_func @condensate_kernels::@score_pages_score_pages {{.*}} {condensate.grid_dependency}
// GRIDDEP: gpu.module @condensate_kernels attributes {condensate.grid_dependency, condensate.shared_bytes_optin = 232448 : i64, condensate.tensor_cores} {
// GRIDDEP: gpu.func @score_pages_score_pages({{.*}}) kernel attributes {condensate.grid_dependency, nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 4 : i32} {
// GRIDDEP-NEXT: nvvm.griddepcontrol wait
// GRIDDEP-NEXT: nvvm.griddepcontrol launch_dependents
// GRIDDEP-NEXT: gpu.thread_id x
// SM80-NOT: grid_dependency
// SM80-NOT: griddepcontrol
// OLD-NOT: griddepcontrol

// NONE-NOT: {{^[[:space:]]*condensate\.}}
// NONE-NOT: = condensate.
// NAME-NOT: @condensate_kernels
// NAME: gpu.launch_func @attn::@score_pages_score_pages
// NAME: gpu.module @attn attributes

// Page bounds: a lane group of 16 lanes x 4 floats per page row (16-byte
// loads), 16 groups x 4 pages = 64 pages per block of 256 threads; grid
// (page blocks, Hkv, B). The group's dot product is summed with xor
// shuffles 8, 4, 2, 1. Launch bounds ask ptxas for 4 resident blocks per
// SM (at most 64 registers a thread): the kernel is latency-bound, and
// occupancy is what hides the latency.
// CHECK-LABEL: func.func @score_pages(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x64xf32>
// CHECK: %[[MP:.*]] = memref.dim %arg4, %c2 : memref<?x4x?xf32>
// CHECK: %[[NB:.*]] = arith.ceildivsi %[[MP]], %c64 : index
// CHECK: gpu.launch_func @condensate_kernels::@score_pages_score_pages blocks in (%[[NB]], %c2{{(_[0-9]+)?}}, %[[B]]) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x64xf32>, %arg1 : memref<?x2x5x64xf32>, %arg2 : memref<?x?xi32>, %arg3 : memref<?xi32>, %arg4 : memref<?x4x?xf32>)
// CHECK-NEXT: return
// CHECK: gpu.module @condensate_kernels attributes {condensate.shared_bytes_optin = 232448 : i64, condensate.tensor_cores} {
// CHECK: gpu.func @score_pages_score_pages(%{{.*}}: memref<?x4x64xf32>, %{{.*}}: memref<?x2x5x64xf32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x4x?xf32>) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 4 : i32} {
// CHECK: gpu.thread_id x
// CHECK: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<?x4x64xf32>, vector<4xf32>
// CHECK: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x5x64xf32>, vector<4xf32>
// CHECK: arith.maximumf %{{.*}} : vector<4xf32>
// CHECK: vector.reduction <add>
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: memref.store %{{.*}}, %arg4[{{.*}}] : memref<?x4x?xf32>
// CHECK: gpu.return
// CHECK-NOT: gpu.func
func.func @score_pages(%q: memref<?x4x64xf32>, %s: memref<?x2x5x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_pages block_minmax q(%q : memref<?x4x64xf32>) summaries(%s : memref<?x2x5x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, scale = 0.125 : f32}
  return
}

// -----

// Token logits from a bf16 cache: 8 lanes x 8 bf16 (16 bytes) per key row,
// 32 tokens per block of 256 threads.
// CHECK-LABEL: func.func @score_tokens(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x64xf32>
// CHECK: %[[NT:.*]] = memref.dim %arg4, %c2 : memref<?x4x?xf32>
// CHECK: %[[NB:.*]] = arith.ceildivsi %[[NT]], %c32 : index
// CHECK: gpu.launch_func @condensate_kernels::@score_tokens_score_tokens blocks in (%[[NB]], %c2{{(_[0-9]+)?}}, %[[B]]) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK: gpu.func @score_tokens_score_tokens({{.*}}) kernel {
// CHECK: %[[K:.*]] = vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: arith.extf %[[K]] : vector<8xbf16> to vector<8xf32>
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: memref.store %{{.*}}, %arg4[{{.*}}] : memref<?x4x?xf32>
// CHECK: gpu.return
func.func @score_tokens(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_tokens q(%q : memref<?x4x64xf32>) k(%k : memref<?x2x16x64xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = 0.125 : f32}
  return
}

// -----

// head_dim 96 in bf16: lane groups of 8 lanes (a power of two, so groups
// tile the warp and butterflies stay in the group), 12 elements each, read
// 8-byte aligned; 32 groups a block.
// CHECK-LABEL: func.func @score_tokens_d96(
// CHECK: gpu.func @score_tokens_d96_score_tokens(
// CHECK: arith.remsi %{{.*}}, %c8{{.*}} : index
// CHECK: vector.load %arg1[{{.*}}] {alignment = 8 : i64} : memref<?x2x16x96xbf16>, vector<12xbf16>
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.shuffle xor %{{.*}}, %c6_i32
// CHECK: gpu.return
func.func @score_tokens_d96(%q: memref<?x4x96xf32>, %k: memref<?x2x16x96xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_tokens q(%q : memref<?x4x96xf32>) k(%k : memref<?x2x16x96xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {scale = 0.125 : f32}
  return
}

// -----

// Top-k: one 512-thread block per (kv head, sequence). The units' ranking
// keys are cached in dynamic shared memory: as many as sm_90's 227 KB opt-in
// holds beside the static arrays (56832 keys, 227328 bytes, a constant of
// the launch), counting the first radix pass's histogram as they are
// stored. Each histogram pass is warp-aggregated: match.any groups the lanes
// with one digit, whose lowest lane adds their count (popc). Then per-warp
// counts (3 per warp), each warp placing its units in unit order by warp
// scans (shuffles up). The two ranked extras (slots 4 and 5) are collected
// in a shared list of 2 entries (~key << 32 | unit, i64) and sorted there
// by a bitonic network (unsigned compares, a barrier a round), then their
// units go to the slots. Optional operands (windows) go
// last.
// CHECK-LABEL: func.func @select_topk(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x?xf32>
// CHECK: gpu.launch_func @condensate_kernels::@select_topk_select_topk blocks in (%c2{{(_[0-9]+)?}}, %[[B]], %c1{{(_[0-9]+)?}}) threads in (%c1024{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c225280_i32 args(%arg0 : memref<?x4x?xf32>, %arg1 : memref<?xi32>, %arg3 : memref<?x2x6xi32>, %arg2 : memref<?xi32>)
// CHECK: gpu.func @select_topk_select_topk(%{{.*}}: memref<?x4x?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x2x6xi32>, %{{.*}}: memref<?xi32>)
// CHECK-SAME: workgroup(%[[HIST:.*]] : memref<256xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[HIST0:.*]] : memref<256xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[STATE:.*]] : memref<8xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<96xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[LIST:.*]] : memref<2xi64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {nvvm.maxntid = array<i32: 1024, 1, 1>, nvvm.minctasm = 1 : i32} {
// CHECK: %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[KEYS:.*]] = memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<56320xi32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[KEYS]][%{{.*}}] : memref<56320xi32, #gpu.address_space<workgroup>>
// CHECK: %[[PEERS:.*]] = nvvm.match.sync any %c-1_i32{{(_[0-9]+)?}}, %{{.*}} : i32 -> i32
// CHECK: %[[COUNT:.*]] = llvm.intr.ctpop(%[[PEERS]]) : (i32) -> i32
// CHECK: memref.atomic_rmw addi %[[COUNT]], %[[HIST0]][%{{.*}}] : (i32, memref<256xi32, #gpu.address_space<workgroup>>) -> i32
// CHECK: gpu.barrier
// CHECK: memref.load %[[HIST0]]
// CHECK: memref.store %{{.*}}, %[[HIST]]
// CHECK: memref.load %[[KEYS]]
// CHECK-NOT: nvvm.match.sync
// CHECK: memref.atomic_rmw addi %c1_i32{{(_[0-9]+)?}}, %[[HIST]][%{{.*}}] : (i32, memref<256xi32, #gpu.address_space<workgroup>>) -> i32
// CHECK: gpu.barrier
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : i32
// CHECK: gpu.shuffle up %{{.*}} : i32
// CHECK: gpu.shuffle idx %{{.*}}, %c31_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : i32
// CHECK: memref.store %{{.*}}, %arg2[{{.*}}] : memref<?x2x6xi32>
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[STATE]][%{{.*}}] : (i32, memref<8xi32, #gpu.address_space<workgroup>>) -> i32
// CHECK: memref.store %{{.*}}, %[[LIST]][%{{.*}}] : memref<2xi64, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load %[[LIST]][%{{.*}}] : memref<2xi64, #gpu.address_space<workgroup>>
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i64
// CHECK: memref.store %{{.*}}, %[[LIST]][%{{.*}}] : memref<2xi64, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[UNIT:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK: memref.store %[[UNIT]], %arg2[{{.*}}] : memref<?x2x6xi32>
// CHECK: gpu.return
func.func @select_topk(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %w: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) windows(%w : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 64 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

// More ranked extras than one list of 1024: the first kernel ranks the
// base and the first list; a second ranks each further list in a block of
// its own, grid (lists, hkv, B) with ceil((min(units, slots) - 1028) /
// 1024) lists, at least one (the launch plan has no subtraction: an add of
// -1028), each list sorted in a shared list of 1024 i64 entries.
// CHECK-LABEL: func.func @select_topk_lists(
// CHECK: gpu.launch_func @condensate_kernels::@select_topk_lists_select_topk blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}})
// CHECK: %[[UNITS:.*]] = memref.dim %arg0, %c2{{(_[0-9]+)?}} : memref<?x4x?xf32>
// CHECK: %[[RANKED:.*]] = arith.minsi %[[UNITS]], %c2104 : index
// CHECK: %[[PAST:.*]] = arith.addi %[[RANKED]], %c-1028 : index
// CHECK: %[[SOME:.*]] = arith.maxsi %[[PAST]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[LISTS:.*]] = arith.ceildivsi %[[SOME]], %c1024{{(_[0-9]+)?}} : index
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0{{(_[0-9]+)?}} : memref<?x4x?xf32>
// CHECK: gpu.launch_func @condensate_kernels::@select_topk_lists_select_topk_lists blocks in (%[[LISTS]], %c2{{(_[0-9]+)?}}, %[[B]]) threads in (%c1024{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size
// CHECK: gpu.func @select_topk_lists_select_topk(
// CHECK-SAME: memref<1024xi64, #gpu.address_space<workgroup>>
// CHECK: gpu.func @select_topk_lists_select_topk_lists(
// CHECK-SAME: memref<1024xi64, #gpu.address_space<workgroup>>
// CHECK: gpu.block_id x
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i64
// CHECK: gpu.return
func.func @select_topk_lists(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x2104xi32>) {
  condensate.select_topk page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x2104xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

// Token selection runs the prefilter first, on scratch of the launch plan:
// the key histograms and each sequence's state (blocks done, threshold
// bin) cleared (grid (hkv, B)), counted (a block per k chunks of 2048
// tokens, k = min(4, ceil(chunks hkv B / 768)) from the launch, its chunks
// looped into one shared histogram; the kernel finds k from its grid) and
// each chunk's candidates compacted (grid (chunks, hkv, B)): after its
// adds, a count
// block fences, bumps the done counter, and the last one finds the
// threshold bin from the whole histogram (a suffix scan); each compaction
// block reads it and places its kept units by one warp's scan of the 64
// (round, warp) counts. The ranking block then gathers the chunks'
// candidates (their counts summed by a warp's lanes) and walks them, the
// unit it writes read from the gathered list.
// A score row per query head (group 2) over tokens: every kernel ranks
// each head's score less its largest over the forced positions, which
// each warp finds (lanes over the positions, a butterfly of maxima).
// CHECK-LABEL: func.func @select_tokens(
// CHECK: %[[CHUNKS:.*]] = arith.ceildivsi %{{.*}}, %c2048
// CHECK: %[[HIST:.*]] = memref.alloc(%{{.*}}) : memref<?x2x4096xi32>
// CHECK: %[[STATE:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xi32>
// CHECK-COUNT-5: memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?xi32>
// CHECK: gpu.launch_func @condensate_kernels::@select_tokens_select_topk_clear blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%[[HIST]] : memref<?x2x4096xi32>, %[[STATE]] : memref<?x2x2xi32>)
// CHECK: %[[ROWS:.*]] = arith.muli %[[CHUNKS]], %c2{{(_[0-9]+)?}} : index
// CHECK: %[[TOTAL:.*]] = arith.muli %[[ROWS]], %{{.*}} : index
// CHECK: %[[K:.*]] = arith.ceildivsi %[[TOTAL]], %c768
// CHECK: %[[KMIN:.*]] = arith.minsi %c4, %[[K]]
// CHECK: %[[PER:.*]] = arith.maxsi %c1{{(_[0-9]+)?}}, %[[KMIN]]
// CHECK: %[[COUNTS:.*]] = arith.ceildivsi %[[CHUNKS]], %[[PER]]
// CHECK: gpu.launch_func @condensate_kernels::@select_tokens_select_topk_count blocks in (%[[COUNTS]], %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x?xf32>, %arg1 : memref<?xi32>, %[[HIST]] : memref<?x2x4096xi32>, %[[STATE]] : memref<?x2x2xi32>)
// CHECK: gpu.launch_func @condensate_kernels::@select_tokens_select_topk_compact blocks in (%[[CHUNKS]], %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x?xf32>, %arg1 : memref<?xi32>, %[[STATE]] : memref<?x2x2xi32>
// CHECK: gpu.launch_func @condensate_kernels::@select_tokens_select_topk blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}}) threads in (%c1024
// CHECK: gpu.func @select_tokens_select_topk_count(
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: %[[OFF0:.*]] = arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: %[[R0:.*]] = arith.select %{{.*}}, %[[OFF0]], %{{.*}} : f32
// CHECK: gpu.grid_dim x
// CHECK: scf.for
// CHECK: arith.subf %{{.*}}, %[[R0]] : f32
// CHECK: nvvm.match.sync any
// CHECK: memref.atomic_rmw addi %{{.*}}, %{{.*}} : (i32, memref<4096xi32, #gpu.address_space<workgroup>>) -> i32
// CHECK: gpu.barrier
// CHECK: memref.atomic_rmw addi %{{.*}}, %{{.*}} : (i32, memref<?x2x4096xi32>) -> i32
// CHECK: nvvm.memory.barrier <gpu>
// CHECK-NEXT: gpu.barrier
// CHECK: memref.atomic_rmw addi %{{.*}}, %arg{{[0-9]+}}[%{{.*}}, %{{.*}}, %c0{{.*}}] : (i32, memref<?x2x2xi32>) -> i32
// CHECK: gpu.barrier
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: gpu.shuffle down
// CHECK: memref.store %{{.*}}, %arg{{[0-9]+}}[%{{.*}}, %{{.*}}, %c1{{.*}}] : memref<?x2x2xi32>
// CHECK: gpu.func @select_tokens_select_topk_compact(
// CHECK-NOT: gpu.shuffle down
// CHECK: memref.load %arg2[%{{.*}}, %{{.*}}, %c1{{.*}}] : memref<?x2x2xi32>
// CHECK: gpu.shuffle up
// CHECK: gpu.barrier
// CHECK: gpu.shuffle up
// CHECK: gpu.barrier
// CHECK: gpu.func @select_tokens_select_topk(
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.barrier
func.func @select_tokens(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>) {
  condensate.select_topk token scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base = 4 : i64}
  return
}

// -----

// Sparse attention on tensor cores (bf16, head_dim 64, group 2 <= 16):
// one block of 4 warps per (split, kv head, sequence). The prescaled query
// is split into bf16 hi + lo fragments in shared memory ([step][hi, lo]
// [lane][register], 4 k-steps of 16 channels); each warp takes tiles of
// 16 slots: 16-byte key and value loads, two m16n8k16 products per k-step
// and n-tile for the scores and two per output n-tile for the values, a
// quad shuffle (xor 1, 2) for each row's maximum. The warps combine through
// shared memory as the lane groups do.
// The grid's x: the first splits of the list's 3 the batch needs for
// about 256 blocks.
// CHECK-LABEL: func.func @sparse_attend(
// CHECK: %[[WANT:.*]] = arith.ceildivsi %c256{{(_[0-9]+)?}}, %{{.*}} : index
// CHECK: %[[LIVE:.*]] = arith.minsi %[[WANT]], %c3{{(_[0-9]+)?}} : index
// CHECK: gpu.launch_func @condensate_kernels::@sparse_attend_sparse_attend blocks in (%[[LIVE]], %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}})
// CHECK: gpu.func @sparse_attend_sparse_attend({{.*}}) workgroup(%[[SM:.*]] : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SACC:.*]] : memref<4x2x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SQ:.*]] : memref<4x2x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: memref.store %{{.*}}, %[[SQ]][{{.*}}] : memref<4x2x32x4xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<8xbf16> to vector<4xi32>
// CHECK: vector.load %arg2[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: vector.load %[[SQ]][{{.*}}] {alignment = 16 : i64} : memref<4x2x32x4xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// A group of 2 (<= 8) runs transposed: S^T = K Q^T, key validity from
// lane r / 2's value rows, each head's max over the lanes of its column
// (c fixed), P^T to the B fragment by movmatrix, O^T += V^T P^T.
// CHECK: gpu.shuffle idx %{{.*}}, %{{.*}}, %c32_i32{{(_[0-9]+)?}} : i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: math.exp %{{.*}} fastmath<afn> : f32
// CHECK: llvm.inline_asm has_side_effects "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;", "=r,r"
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: memref.store %{{.*}}, %[[SM]][{{.*}}] : memref<4x2xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[SACC]][{{.*}}] : memref<4x2x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %arg5[{{.*}}] : memref<?x4x3x64xf32>
// CHECK: gpu.return
// With attend-stages=4 each warp's tiles are copied by cp.async (16 bytes
// a lane and row) into its ring of 4 tiles in dynamic shared memory (64
// KB), three in flight while it multiplies one, each fragment read back
// where its products first use it: two m16n8k16 products per k-step and
// n-tile for the scores and two per output n-tile for the values, a quad
// shuffle (xor 1, 2) for each row's maximum. After a barrier the warps' accumulators take the rings'
// place and combine through shared memory as the lane groups do.
// RING-LABEL: func.func @sparse_attend(
// RING: gpu.launch_func @condensate_kernels::@sparse_attend_sparse_attend blocks in (%{{[0-9]+}}, %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c65536_i32
// RING: gpu.func @sparse_attend_sparse_attend({{.*}}) workgroup(%[[SM:.*]] : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SQ:.*]] : memref<4x2x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// RING: arith.truncf %{{.*}} : f32 to bf16
// RING: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// RING: memref.store %{{.*}}, %[[SQ]][{{.*}}] : memref<4x2x32x4xi32, #gpu.address_space<workgroup>>
// RING: gpu.barrier
// RING: %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// RING: %[[RING:.*]] = memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xi32, #gpu.address_space<workgroup>>
// RING: memref.extract_aligned_pointer_as_index %[[RING]]
// RING: memref.extract_aligned_pointer_as_index %arg1 : memref<?x2x16x64xbf16> -> index
// RING: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
// RING: memref.extract_aligned_pointer_as_index %arg2 : memref<?x2x16x64xbf16> -> index
// RING: nvvm.cp.async.shared.global
// RING: nvvm.cp.async.commit.group
// RING: scf.for
// RING: nvvm.cp.async.commit.group
// RING: nvvm.cp.async.wait.group 3
// RING: vector.load %[[SQ]][{{.*}}] {alignment = 16 : i64} : memref<4x2x32x4xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// RING: vector.load %[[RING]][{{.*}}] {alignment = 16 : i64} : memref<16384xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// RING: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// RING: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// RING: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// RING: math.exp %{{.*}} fastmath<afn> : f32
// RING: llvm.inline_asm has_side_effects "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;"
// RING: vector.load %[[RING]][{{.*}}] {alignment = 16 : i64} : memref<16384xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// RING: vector.bitcast %{{.*}} : vector<4xi32> to vector<8xbf16>
// RING: nvvm.mma.sync
// RING: scf.yield
// RING: gpu.barrier
// RING: %[[ACC:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x2x64xf32, #gpu.address_space<workgroup>>
// RING: memref.store %{{.*}}, %[[SM]][{{.*}}] : memref<4x2xf32, #gpu.address_space<workgroup>>
// RING: memref.store %{{.*}}, %[[ACC]][{{.*}}] : memref<4x2x64xf32, #gpu.address_space<workgroup>>
// RING: gpu.barrier
// RING: memref.store %{{.*}}, %arg5[{{.*}}] : memref<?x4x3x64xf32>
// RING: gpu.return
// Sparse attention without tensor cores: one block per (split, kv head,
// sequence). A lane group
// of 8 lanes reads a bf16 key and value row with one 16-byte load each
// (8 x bf16), serves both query heads of the GQA group (two xor-shuffle
// reductions per row) and keeps online-softmax state in registers. The loop
// is software-pipelined: the first round's rows are loaded before it, and
// each round loads the next round's rows before its arithmetic. 16 groups
// of 8 lanes combine through 16-byte aligned shared memory. 1 + 64 + 4 x 16
// = 129 slots in up to 3 splits (of 48, whole tiles of 16), as many as the
// batch needs.
// NOMMA-LABEL: func.func @sparse_attend(
// NOMMA: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x64xf32>
// NOMMA: %[[LIVE:.*]] = arith.minsi %{{.*}}, %c3{{(_[0-9]+)?}} : index
// NOMMA: gpu.launch_func @condensate_kernels::@sparse_attend_sparse_attend blocks in (%[[LIVE]], %c2{{(_[0-9]+)?}}, %[[B]]) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x64xf32>, %arg1 : memref<?x2x16x64xbf16>, %arg2 : memref<?x2x16x64xbf16>, %arg3 : memref<?x?xi32>, %arg4 : memref<?xi32>, %arg6 : memref<?x4x3x64xf32>, %arg7 : memref<?x4x3x3xf32>, %arg5 : memref<?x2x6xi32>)
// NOMMA: gpu.func @sparse_attend_sparse_attend({{.*}}) workgroup(%[[SM:.*]] : memref<16x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SL:.*]] : memref<16x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SC:.*]] : memref<16xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SACC:.*]] : memref<16x2x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// NOMMA: %[[SPLIT:.*]] = gpu.block_id x
// NOMMA: %[[LIVEK:.*]] = gpu.grid_dim x
// NOMMA: arith.ceildivsi %c129{{(_[0-9]+)?}}, %[[LIVEK]] : index
// NOMMA: arith.muli %[[SPLIT]], %{{.*}} : index
// Split 0's block marks the splits not launched as empty.
// NOMMA: %[[WIDTH:.*]] = memref.dim %arg6, %c2{{(_[0-9]+)?}} : memref<?x4x3x3xf32>
// NOMMA: arith.subi %[[WIDTH]], %[[LIVEK]] : index
// NOMMA: %[[TID:.*]] = gpu.thread_id x
// NOMMA: %[[LANE:.*]] = arith.remsi %[[TID]], %c8{{.*}} : index
// NOMMA: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<?x4x64xf32>, vector<8xf32>
// NOMMA: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<?x4x64xf32>, vector<8xf32>
// NOMMA: %[[FIRST:.*]]:6 = scf.if %{{.*}} -> (i1, i1, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>) {
// NOMMA: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// NOMMA: scf.for {{.*}} iter_args({{.*}}%[[FIRST]]#5) -> (f32, f32, f32, f32, f32, vector<8xf32>, vector<8xf32>, i1, i1, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>) {
// NOMMA: memref.load %arg7[{{.*}}] : memref<?x2x6xi32>
// NOMMA: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// NOMMA-NEXT: vector.load %arg2[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// NOMMA: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// NOMMA: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// NOMMA: gpu.shuffle xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// NOMMA: gpu.shuffle xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// NOMMA: math.exp %{{.*}} fastmath<afn> : f32
// NOMMA: math.fma %{{.*}} : vector<8xf32>
// NOMMA: scf.yield
// NOMMA: memref.store %{{.*}}, %[[SM]][{{.*}}] : memref<16x2xf32, #gpu.address_space<workgroup>>
// NOMMA: memref.store %{{.*}}, %[[SACC]][{{.*}}] : memref<16x2x64xf32, #gpu.address_space<workgroup>>
// NOMMA: gpu.barrier
// NOMMA: memref.store %{{.*}}, %arg5[%{{.*}}, %{{.*}}, %[[SPLIT]], %{{.*}}] : memref<?x4x3x64xf32>
// NOMMA: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}, %[[SPLIT]], %{{.*}}] : memref<?x4x3x3xf32>
// NOMMA: gpu.return
func.func @sparse_attend(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xbf16>, %v: memref<?x2x16x64xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x3x64xf32>, %pml: memref<?x4x3x3xf32>) {
  condensate.sparse_attend page q(%q : memref<?x4x64xf32>) kv(%k, %v : memref<?x2x16x64xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) partials(%po, %pml : memref<?x4x3x64xf32>, memref<?x4x3x3xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, first = 0 : i64, count = 4 : i64, include_forced = true, scale = 0.125 : f32}
  return
}

// -----

// Dense attention: the grid's x extent is the splits that fill one wave of
// the chip (512 blocks at head_dim 64), ceil(512 / (batch x 2 kv heads)),
// at most the static split count (128); split 0's block writes the splits
// past it empty, and each sequence uses min(live, max(ceil(n / 128), 1))
// equal chunks; a masked group attends nothing.
// CHECK-LABEL: func.func @dense_attend(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x64xf32>
// CHECK: %[[ROWS:.*]] = arith.muli %[[B]], %c2{{(_[0-9]+)?}} : index
// CHECK: %[[ROWS1:.*]] = arith.maxsi %[[ROWS]], %c1{{(_[0-9]+)?}} : index
// CHECK: %[[WANT0:.*]] = arith.ceildivsi %c512{{(_[0-9]+)?}}, %[[ROWS1]] : index
// CHECK: %[[LIVE:.*]] = arith.minsi %[[WANT0]], %c128{{(_[0-9]+)?}} : index
// CHECK: gpu.launch_func @condensate_kernels::@dense_attend_dense_attend blocks in (%[[LIVE]], %c2{{(_[0-9]+)?}}, %[[B]]) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args({{.*}}, %arg6 : memref<?x4x128x64xf32>, %arg7 : memref<?x4x128x3xf32>, %arg5 : memref<?x2xi32>)
// CHECK: gpu.func @dense_attend_dense_attend({{.*}}) workgroup({{.*}} : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, {{.*}} : memref<4x2x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, {{.*}} : memref<4x2x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: %[[N:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[GX:.*]] = gpu.grid_dim x
// CHECK: %[[PW:.*]] = memref.dim %arg6, %c2{{(_[0-9]+)?}} : memref<?x4x128x3xf32>
// CHECK: arith.subi %[[PW]], %[[GX]] : index
// CHECK: memref.store %{{.*}}, %arg6[{{.*}}] : memref<?x4x128x3xf32>
// CHECK: %[[C:.*]] = arith.ceildivsi %[[N]], %c128{{(_[0-9]+)?}} : index
// CHECK: %[[C1:.*]] = arith.maxsi %[[C]], %c1{{.*}} : index
// CHECK: %[[USED:.*]] = arith.minsi %[[GX]], %[[C1]] : index
// CHECK: arith.ceildivsi %[[N]], %[[USED]] : index
// CHECK: %[[M:.*]] = memref.load %arg7[{{.*}}] : memref<?x2xi32>
// CHECK: arith.cmpi ne, %[[M]], %c0_i32 : i32
// CHECK: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: vector.load %arg2[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// The loop loads the next tile's rows first and passes them through an
// empty asm (outputs tied to inputs) before it carries them: LLVM would
// otherwise fold the prefetch into a load at the loop's head.
// CHECK: scf.for
// CHECK: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: vector.load %arg2[{{.*}}] {alignment = 16 : i64} : memref<?x2x16x64xbf16>, vector<8xbf16>
// CHECK: llvm.inline_asm "", "=r,=r,=r,=r,0,1,2,3"
// CHECK: nvvm.mma.sync
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %arg5[{{.*}}] : memref<?x4x128x64xf32>
// CHECK: gpu.return
// With attend-stages=4: three tiles' copies before the loop, one an
// iteration, each waited for three iterations later; the loop carries no
// rows.
// RING-LABEL: func.func @dense_attend(
// RING: gpu.launch_func @condensate_kernels::@dense_attend_dense_attend blocks in (%{{[0-9]+}}, %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) dynamic_shared_memory_size %c65536_i32 args(
// RING-COUNT-3: nvvm.cp.async.commit.group
// RING: scf.for {{.*}} -> ({{[^v]*}}) {
// RING: nvvm.cp.async.shared.global
// RING: nvvm.cp.async.commit.group
// RING: nvvm.cp.async.wait.group 3
// RING: nvvm.mma.sync
func.func @dense_attend(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xbf16>, %v: memref<?x2x16x64xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %m: memref<?x2xi32>, %po: memref<?x4x128x64xf32>, %pml: memref<?x4x128x3xf32>) {
  condensate.dense_attend q(%q : memref<?x4x64xf32>) kv(%k, %v : memref<?x2x16x64xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) mask(%m : memref<?x2xi32>) partials(%po, %pml : memref<?x4x128x64xf32>, memref<?x4x128x3xf32>) {scale = 0.125 : f32}
  return
}

// -----

// The certificate: one 256-thread block per (kv head, sequence); the
// omitted mass of each query head is summed in f64 by atomic adds into
// shared memory, skipping the selected units found in a shared bitmap (the
// base marked first). It reads only the base partials' (m, l, count).
// CHECK-LABEL: func.func @certify(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x4x?xf32>
// CHECK: gpu.launch_func @condensate_kernels::@certify_certify blocks in (%c2{{(_[0-9]+)?}}, %[[B]], %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x?xf32>, %arg1 : memref<?xi32>, %arg2 : memref<?x2x6xi32>, %arg4 : memref<?x4x1x3xf32>, %arg5 : memref<?x2xi32>, %arg6 : memref<?x2xi32>, %arg7 : memref<?x4x5xf32>)
// CHECK: gpu.func @certify_certify({{.*}}) workgroup(%{{.*}} : memref<2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[Z:.*]] : memref<2xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[U:.*]] : memref<2xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<3xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[MARKS:.*]] : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: gpu.barrier
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[MARKS]]
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} -> (f64, f64) {
// CHECK: memref.load %[[MARKS]]
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[U]][%{{.*}}] : (f64, memref<2xf64, #gpu.address_space<workgroup>>) -> f64
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[U]][%{{.*}}] : (f64, memref<2xf64, #gpu.address_space<workgroup>>) -> f64
// CHECK: gpu.barrier
// Per head: eps_hat, extra count and fallback flag into stats columns 0, 2, 3
// (the merge writes column 1); then the group's extra count and fallback.
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}, %c2{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %arg6[%{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %arg4[%[[BB:.*]], %[[G:.*]]] : memref<?x2xi32>
// CHECK: memref.store %{{.*}}, %arg5[%[[BB]], %[[G]]] : memref<?x2xi32>
// CHECK: gpu.return
func.func @certify(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x64xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>) {
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x64xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// Merge: one block of 4 warps (the fewest; 2 splits) per (sequence, query
// head); the max over splits is a warp-wide xor reduction, then over the
// warps through shared memory (each warp's max and each set's live end);
// the warps walk the live splits in turn, each lane owning 2 of the 64
// channels, and combine through shared memory ((l, count) and the weighted
// values of each warp).
// CHECK-LABEL: func.func @merge(
// CHECK: %[[B:.*]] = memref.dim %arg2, %c0 : memref<?x4x64xf32>
// CHECK: %[[ROWS:.*]] = arith.muli %[[B]], %c4 : index
// CHECK: gpu.launch_func @condensate_kernels::@merge_merge blocks in (%[[ROWS]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x2x64xf32>, %arg1 : memref<?x4x2x3xf32>, %arg2 : memref<?x4x64xf32>, %arg3 : memref<?x4x5xf32>)
// CHECK: gpu.func @merge_merge(%{{.*}}: memref<?x4x2x64xf32>, %{{.*}}: memref<?x4x2x3xf32>, %{{.*}}: memref<?x4x64xf32>, %{{.*}}: memref<?x4x5xf32>) workgroup(%[[SLC:.*]] : memref<4x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SACC:.*]] : memref<4x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SM:.*]] : memref<4xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SEND:.*]] : memref<4x1xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c128
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: memref.store %{{.*}}, %[[SM]][%{{.*}}] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[SEND]][%{{.*}}, %c0{{(_[0-9]+)?}}] : memref<4x1xi32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load %[[SM]][%c3{{(_[0-9]+)?}}] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[SEND]][%c3{{(_[0-9]+)?}}, %c0{{(_[0-9]+)?}}] : memref<4x1xi32, #gpu.address_space<workgroup>>
// CHECK: vector.load %arg0[{{.*}}] {alignment = 8 : i64} : memref<?x4x2x64xf32>, vector<2xf32>
// CHECK: math.exp %{{.*}} fastmath<afn> : f32
// CHECK: vector.store %{{.*}}, %[[SACC]][{{.*}}] : memref<4x64xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: gpu.barrier
// CHECK: vector.store %{{.*}}, %arg2[{{.*}}] : memref<?x4x64xf32>, vector<2xf32>
// CHECK: memref.store %{{.*}}, %arg3[%{{.*}}, %{{.*}}, %c1{{.*}}] : memref<?x4x5xf32>
// stats_eps = 0 goes to both bounds (columns 0 and 4).
// CHECK: memref.store %[[EPS:.*]], %arg3[%{{.*}}, %{{.*}}, %c0{{.*}}] : memref<?x4x5xf32>
// CHECK: memref.store %[[EPS]], %arg3[%{{.*}}, %{{.*}}, %c4{{.*}}] : memref<?x4x5xf32>
// CHECK: gpu.return
func.func @merge(%po: memref<?x4x2x64xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x64xf32>, %st: memref<?x4x5xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x64xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x64xf32>) stats(%st : memref<?x4x5xf32>) {stats_eps = 0.0 : f32}
  return
}

// -----

// The value box: after the extra/fallback decision, one warp per page row
// (8 rows of 32 lanes, 2 channels per lane at head_dim 64); row r walks
// pages r, r+8, ... (none after a fallback: the box stays empty) and folds
// the value min/max summaries of pages with an omitted position into
// registers; the rows meet in shared memory behind a barrier and the
// channel's min/max over rows goes to vbox[b, g].
// CHECK-LABEL: func.func @certify_box(
// CHECK: gpu.launch_func @condensate_kernels::@certify_box_certify blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args({{.*}}, %arg7 : memref<?x4x5xf32>, %arg8 : memref<?x2x5x64xf32>, %arg9 : memref<?x?xi32>, %arg10 : memref<?x2x2x64xf32>)
// CHECK: gpu.func @certify_box_certify({{.*}}, %[[S:.*]]: memref<?x2x5x64xf32>, %[[PT:.*]]: memref<?x?xi32>, %[[VB:.*]]: memref<?x2x2x64xf32>) workgroup({{.*}}, %[[SMB:.*]] : memref<8x2x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[ROW:.*]] = arith.divsi %[[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: %[[CH:.*]] = arith.remsi %[[TID]], %c32{{(_[0-9]+)?}} : index
// CHECK: scf.if
// CHECK: %[[NP:.*]] = arith.ceildivsi %{{.*}}, %c16{{(_[0-9]+)?}} : index
// CHECK: %[[UB:.*]] = arith.select %{{.*}}, %c0{{(_[0-9]+)?}}, %[[NP]] : index
// CHECK: scf.for %[[J:.*]] = %[[ROW]] to %[[UB]] step %c8{{(_[0-9]+)?}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
// CHECK: memref.load %[[PT]][%{{.*}}, %[[J]]] : memref<?x?xi32>
// CHECK: memref.load %[[S]][%{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}, %{{.*}}] : memref<?x2x5x64xf32>
// CHECK: memref.load %[[S]][%{{.*}}, %{{.*}}, %c4{{(_[0-9]+)?}}, %{{.*}}] : memref<?x2x5x64xf32>
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %[[SMB]][%[[ROW]], %c0{{(_[0-9]+)?}}, %{{.*}}] : memref<8x2x64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[SMB]][%[[ROW]], %c1{{(_[0-9]+)?}}, %{{.*}}] : memref<8x2x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load %[[SMB]][%c7{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %{{.*}}] : memref<8x2x64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[VB]][%{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}, %{{.*}}] : memref<?x2x2x64xf32>
// CHECK: memref.store %{{.*}}, %[[VB]][%{{.*}}, %{{.*}}, %c1{{(_[0-9]+)?}}, %{{.*}}] : memref<?x2x2x64xf32>
// CHECK: gpu.return
func.func @certify_box(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %po: memref<?x4x1x64xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x64xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x64xf32>) {
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) base(%po, %pml : memref<?x4x1x64xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x64xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x64xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// head_dim 512 with more than 64 extras: the bitmap of the selected set,
// the extras' chunk sums and the fast walk's sums leave room for 4 rows of
// the value box, so the kernel stays within the 48 KB of static shared
// memory. The fast walk's run sums (100 extras: 4 runs of 32 slots, one
// column a head) come from a grid kernel launched first, a block for each
// 256 slots that can hold a unit.
// CHECK-LABEL: func.func @certify_box_wide(
// CHECK: %[[RUNS:.*]] = memref.alloc(%{{.*}}) : memref<?x2x4x2xf64>
// CHECK: %[[UNITS:.*]] = memref.dim %arg0, %c2
// CHECK: %[[MIN:.*]] = arith.minsi %[[UNITS]], %c100
// CHECK: %[[CD:.*]] = arith.ceildivsi %[[MIN]], %c256
// CHECK: %[[BLOCKS:.*]] = arith.maxsi %[[CD]], %c1
// CHECK: gpu.launch_func @condensate_kernels::@certify_box_wide_certify_sums blocks in (%[[BLOCKS]], %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args({{.*}}, %[[RUNS]] : memref<?x2x4x2xf64>)
// CHECK: gpu.launch_func @condensate_kernels::@certify_box_wide_certify blocks in {{.*}} args({{.*}}, %[[RUNS]] : memref<?x2x4x2xf64>)
// CHECK: gpu.func @certify_box_wide_certify_sums({{.*}}) workgroup(%{{.*}} : memref<2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK: gpu.shuffle  xor
// CHECK: gpu.func @certify_box_wide_certify({{.*}}) workgroup({{.*}}, %{{.*}} : memref<4x2x512xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4096xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<256x2xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8x2xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8x6xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: gpu.shuffle  down
func.func @certify_box_wide(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x104xi32>, %po: memref<?x4x1x512xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>, %s: memref<?x2x5x512xf32>, %pt: memref<?x?xi32>, %vb: memref<?x2x2x512xf32>) {
  condensate.certify page scores(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x104xi32>) base(%po, %pml : memref<?x4x1x512xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) summaries(%s : memref<?x2x5x512xf32>) pages(%pt : memref<?x?xi32>) vbox(%vb : memref<?x2x2x512xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-4 : f64}
  return
}

// -----

// The output bound in the merge: each lane's 2 channels against the box of
// its group, summed over the warp by xor shuffles (all lanes), then lane 0
// writes eps_hat * sqrt(sum) to stats column 4.
// CHECK-LABEL: func.func @merge_box(
// CHECK: gpu.func @merge_box_merge({{.*}}, %[[ST:.*]]: memref<?x4x5xf32>, %[[VB:.*]]: memref<?x2x2x64xf32>) workgroup({{.*}}) kernel {
// CHECK: vector.store %[[O:.*]], %{{.*}}[{{.*}}] : memref<?x4x64xf32>, vector<2xf32>
// CHECK: %[[LO:.*]] = vector.load %[[VB]][%{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}, %{{.*}}] {alignment = 8 : i64} : memref<?x2x2x64xf32>, vector<2xf32>
// CHECK: %[[HI:.*]] = vector.load %[[VB]][%{{.*}}, %{{.*}}, %c1{{(_[0-9]+)?}}, %{{.*}}] {alignment = 8 : i64} : memref<?x2x2x64xf32>, vector<2xf32>
// CHECK-DAG: arith.subf %[[HI]], %[[O]] : vector<2xf32>
// CHECK-DAG: arith.subf %[[O]], %[[LO]] : vector<2xf32>
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32{{(_[0-9]+)?}}, %c32_i32{{(_[0-9]+)?}} : f32
// CHECK: %[[DIST:.*]] = math.sqrt %{{.*}} : f32
// CHECK: %[[EPS:.*]] = memref.load %[[ST]][%{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: arith.mulf %[[EPS]], %[[DIST]] : f32
// CHECK: memref.store %{{.*}}, %[[ST]][%{{.*}}, %{{.*}}, %c1{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: memref.store %{{.*}}, %[[ST]][%{{.*}}, %{{.*}}, %c4{{(_[0-9]+)?}}] : memref<?x4x5xf32>
// CHECK: gpu.return
func.func @merge_box(%po: memref<?x4x2x64xf32>, %pml: memref<?x4x2x3xf32>, %f: memref<?x2xi32>, %pod: memref<?x4x3x64xf32>, %pmld: memref<?x4x3x3xf32>, %o: memref<?x4x64xf32>, %st: memref<?x4x5xf32>, %vb: memref<?x2x2x64xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x64xf32>, memref<?x4x2x3xf32>) fallback(%f : memref<?x2xi32>) dense(%pod, %pmld : memref<?x4x3x64xf32>, memref<?x4x3x3xf32>) out(%o : memref<?x4x64xf32>) stats(%st : memref<?x4x5xf32>) vbox(%vb : memref<?x2x2x64xf32>)
  return
}

// -----

// Append: one 128-thread block per row, threads over (kv head, channel);
// the block of a page's first row (row 0, or a row whose page differs from
// the row before) appends that page's rows in order, at most 16 - offset
// of them: bf16 stores and summary updates (reset on a page's first token).
// CHECK-LABEL: func.func @append_kv(
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0 : memref<?x2x64xf32>
// CHECK: gpu.launch_func @condensate_kernels::@append_kv_append_kv blocks in (%[[B]], %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) threads in (%c128{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x2x64xf32>, %arg1 : memref<?x2x64xf32>, %arg2 : memref<?x2x16x64xbf16>, %arg3 : memref<?x2x16x64xbf16>, %arg4 : memref<?x?xi32>, %arg5 : memref<?xi32>, %arg6 : memref<?x2x5x64xf32>)
// CHECK: gpu.func @append_kv_append_kv({{.*}}) kernel {
// CHECK: %[[BID:.*]] = gpu.block_id  x
// CHECK: %[[ROWS:.*]] = memref.dim %arg0, %c0 : memref<?x2x64xf32>
// CHECK: %[[PT:.*]] = memref.load %arg4[%[[BID]], %{{.*}}] : memref<?x?xi32>
// CHECK: %[[PAGE:.*]] = arith.index_cast %[[PT]] : i32 to index
// CHECK: %[[OFF:.*]] = arith.remsi %{{.*}}, %c16{{.*}} : index
// CHECK: %[[PREV:.*]] = arith.maxsi %{{.*}}, %c0{{.*}} : index
// CHECK: %[[PPT:.*]] = memref.load %arg4[%[[PREV]], %{{.*}}] : memref<?x?xi32>
// CHECK: %[[PREVPAGE:.*]] = arith.index_cast %[[PPT]] : i32 to index
// CHECK: %[[NEWPAGE:.*]] = arith.cmpi ne, %[[PREVPAGE]], %[[PAGE]] : index
// CHECK: %[[ROW0:.*]] = arith.cmpi eq, %[[BID]], %c0{{.*}} : index
// CHECK: %[[LEAD:.*]] = arith.ori %[[ROW0]], %[[NEWPAGE]] : i1
// CHECK: scf.if %[[LEAD]] {
// CHECK: %[[LEFT:.*]] = arith.subi %[[ROWS]], %[[BID]] : index
// CHECK: %[[ROOM:.*]] = arith.subi %c16{{.*}}, %[[OFF]] : index
// CHECK: %[[LEN:.*]] = arith.minsi %[[ROOM]], %[[LEFT]] : index
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %[[LEN]] step %c1{{.*}} {
// CHECK: %[[R:.*]] = arith.addi %[[BID]], %[[J]] : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0{{.*}} : index
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %{{.*}}, %[[PAGE]] : index
// CHECK: scf.if %[[SAME]] {
// CHECK: scf.for %{{.*}} = %{{.*}} to %c128{{.*}} step %c128{{.*}} {
// CHECK: memref.load %arg0[%[[R]], {{.*}}] : memref<?x2x64xf32>
// CHECK: %[[K:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %[[K]], %arg2[{{.*}}] : memref<?x2x16x64xbf16>
// CHECK: arith.minimumf
// CHECK: arith.select %[[FIRST]]
// CHECK: gpu.return
func.func @append_kv(%kn: memref<?x2x64xf32>, %vn: memref<?x2x64xf32>, %k: memref<?x2x16x64xbf16>, %v: memref<?x2x16x64xbf16>, %pt: memref<?x?xi32>, %pos: memref<?xi32>, %s: memref<?x2x5x64xf32>) {
  condensate.append_kv k(%kn : memref<?x2x64xf32>) v(%vn : memref<?x2x64xf32>) into(%k, %v : memref<?x2x16x64xbf16>) pages(%pt : memref<?x?xi32>) positions(%pos : memref<?xi32>) summaries(%s : memref<?x2x5x64xf32>)
  return
}

// -----

// Two stages in one function: both kernels land in the one gpu.module,
// named after the function; a repeated stage gets a numbered name.
// CHECK-LABEL: func.func @two(
// CHECK: gpu.launch_func @condensate_kernels::@two_merge blocks
// CHECK: gpu.launch_func @condensate_kernels::@two_merge_0 blocks
// CHECK: gpu.module @condensate_kernels attributes {condensate.shared_bytes_optin = 232448 : i64, condensate.tensor_cores} {
// CHECK: gpu.func @two_merge(
// CHECK: gpu.func @two_merge_0(
// CHECK-NOT: gpu.module
func.func @two(%po: memref<?x4x2x64xf32>, %pml: memref<?x4x2x3xf32>, %o: memref<?x4x64xf32>) {
  condensate.merge partials(%po, %pml : memref<?x4x2x64xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x64xf32>)
  condensate.merge partials(%po, %pml : memref<?x4x2x64xf32>, memref<?x4x2x3xf32>) out(%o : memref<?x4x64xf32>)
  return
}

// -----

// A decode attention must be decomposed first.
func.func @undecomposed(%q: memref<?x4x16xf32>, %k: memref<?x2x16x16xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %o: memref<?x4x16xf32>) {
  // expected-error@+1 {{'condensate.decode_attention' op must be decomposed before lowering to GPU kernels (run condensate-decompose)}}
  condensate.decode_attention q(%q : memref<?x4x16xf32>) kv(%k, %k : memref<?x2x16x16xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) out(%o : memref<?x4x16xf32>) {policy = #condensate.dense, scale = 0.25 : f32}
  return
}

// -----

// Sketch scores of a group of 7 at pages of 64 on tensor cores (sm_90 by
// default; without them, CUDA cores): a warp per page and kv head, the
// page's four 16-token tiles the mma rows, 8 warps a block (512 tokens).
// Lane (r, s) holds tokens 8r .. 8r + 7 (tile t's rows r and r + 8 are
// tokens 8r + 2t and 8r + 2t + 1: one word row), channels 4s .. 4s + 3 of
// each k-step. The first pair of k-steps' code words (one 16-byte load a
// step) go out before the page's box is read; a full page's per-channel
// terms (lo_c, step_c 2^bits, slack weight) are computed once, d / 32 = 2
// channels a lane, into the warp's slice of shared memory (3 x 64 floats a
// warp). The loop takes two k-steps an iteration. Per k-step each lane
// turns its words into bf16 pairs 1 + code / 16 (the A operand): a byte
// permute per tile and channel pair (selector 0x4400: byte 0 of both
// words), a shift (left 3 for the low nibble's token, right 1 for the high
// nibble's) and one lop3; after the second step's codes, it loads the next
// pair's words; it reads the query and its 4 channels' terms, folds
// q_c lo_c - a_c and the slack into the constant by two fma, and splits
// a_c into two bf16 (hi: its top 16 bits, packed by a permute, selector
// 0x7632; mid: the rest rounded). Per tile the two steps' four mma.sync
// (mid, hi) chain from zero and are added to the tile's sums once. The
// head's constant (box for a page that is not full) is summed over its
// four lanes, each lane takes the constants of its two output heads by
// index shuffles and stores each head's eight tokens as two 16-byte
// stores where the row allows (one by one otherwise).
// CHECK-LABEL: func.func @score_sketch_mma(
// CHECK: %[[T:.*]] = arith.ceildivsi %{{.*}}, %c512 : index
// CHECK: gpu.launch_func @condensate_kernels::@score_sketch_mma_score_sketch blocks in (%[[T]], %c1, {{.*}} threads in (%c256,
// CHECK: gpu.func @score_sketch_mma_score_sketch({{.*}}) workgroup(%[[TERMS:.*]] : memref<1536xf32, #gpu.address_space<workgroup>> {{.*}}) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 4 : i32}
// CHECK: %[[CODE:.*]] = arith.constant 7864440 : i32
// CHECK: %[[ONE:.*]] = arith.constant 1065369472 : i32
// CHECK: %[[TOP:.*]] = arith.constant -65536 : i32
// CHECK: scf.if %{{.*}} -> ({{(f32, )+}}f32)
// CHECK-COUNT-2: vector.load %arg1{{.*}} vector<4xf32>
// CHECK-COUNT-2: vector.load %arg1{{.*}} vector<2xf32>
// CHECK-COUNT-3: vector.store %{{.*}}, %[[TERMS]]{{.*}} vector<2xf32>
// CHECK: nvvm.bar.warp.sync
// CHECK: scf.for {{.*}} to %c4{{.*}} step %c2{{.*}} iter_args({{.*}}) -> ({{(f32, )+}}vector<4xf32>, vector<4xf32>)
// CHECK: %[[P:.*]] = nvvm.prmt <default> %c17408_i32{{.*}}
// CHECK: arith.shli %[[P]], %c3_i32
// CHECK: llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 234;", "=r,r,r,r" %{{.*}}, %[[CODE]], %[[ONE]]
// CHECK: arith.shrui %[[P]], %c1_i32
// CHECK-COUNT-15: llvm.inline_asm "lop3.b32
// CHECK-NOT: vector.load %arg1
// CHECK: vector.load %arg0{{.*}} vector<4xf32>
// CHECK-COUNT-3: vector.load %[[TERMS]]{{.*}} vector<4xf32>
// CHECK: math.fma
// CHECK: math.fma
// CHECK: arith.andi %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: nvvm.prmt <default> %c30258_i32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: nvvm.mma.sync {{.*}} C[%[[Z:.*]], %[[Z]], %[[Z]], %[[Z]]]
// CHECK-COUNT-7: nvvm.mma.sync
// CHECK-COUNT-16: llvm.inline_asm "lop3.b32
// CHECK-COUNT-2: vector.load %arg1{{.*}} vector<4xf32>
// CHECK: vector.load %arg0{{.*}} vector<4xf32>
// CHECK-NOT: C[%[[Z]], %[[Z]], %[[Z]], %[[Z]]]
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: } else {
// CHECK: arith.maximumf
// CHECK: gpu.shuffle  idx
// CHECK: gpu.shuffle  idx
// CHECK: memref.extract_aligned_pointer_as_index %arg4
// CHECK-COUNT-2: vector.store %{{.*}}, %arg4[%block_id_z, %{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<?x7x?xf32>, vector<4xf32>
// CHECK: memref.store %{{.*}}, %arg4[%block_id_z, %{{.*}}, %{{.*}}] : memref<?x7x?xf32>
// NOMMA-LABEL: func.func @score_sketch_mma(
// NOMMA-NOT: nvvm.mma.sync
// NOMMA: gpu.barrier
func.func @score_sketch_mma(%q: memref<?x7x64xf32>, %s: memref<?x1x13x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x7x?xf32>) {
  condensate.score_sketch q(%q : memref<?x7x64xf32>) summaries(%s : memref<?x1x13x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x7x?xf32>) {page_size = 64 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// On tensor cores, top-k alone: after the constants' index shuffles, each
// lane's two heads' max, then laneMax over the lanes of a token (xor 2,
// xor 1), stored by the token's first lane.
// CHECK-LABEL: func.func @score_sketch_mma_group(
// CHECK: gpu.func @score_sketch_mma_group_score_sketch(
// CHECK: nvvm.mma.sync
// CHECK: gpu.shuffle idx
// CHECK: gpu.shuffle idx
// CHECK: %[[S2:.*]], %{{.*}} = gpu.shuffle xor %[[M:.*]], %c2_i32
// CHECK-NEXT: %[[M2:.*]] = arith.maximumf %[[M]], %[[S2]] : f32
// CHECK: %[[S1:.*]], %{{.*}} = gpu.shuffle xor %[[M2]], %c1_i32
// CHECK-NEXT: arith.maximumf %[[M2]], %[[S1]] : f32
// CHECK: memref.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %{{.*}}] : memref<?x1x?xf32>
func.func @score_sketch_mma_group(%q: memref<?x7x64xf32>, %s: memref<?x1x13x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x1x?xf32>) {
  condensate.score_sketch q(%q : memref<?x7x64xf32>) summaries(%s : memref<?x1x13x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x1x?xf32>) {page_size = 64 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// A group of 4 on tensor cores takes half columns: B column r is head
// r % 4 over two of the lane's four channels (r < 4 the first two, else
// the last two), the other register zero, so a lane reads and builds two
// a_c (vector<2xf32>) a k-step; after the page, columns h and h + 4 are
// added (xor 2) and the constant's halves (xor 16), and only lanes s < 2
// store. A group of 3 stays on CUDA cores.
// CHECK-LABEL: func.func @score_sketch_mma_half(
// CHECK: gpu.func @score_sketch_mma_half_score_sketch(
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, )+}}vector<4xf32>, vector<4xf32>)
// CHECK: vector.load %arg0{{.*}} vector<2xf32>
// CHECK-COUNT-3: vector.load %{{.*}} : memref<3072xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: arith.select %{{.*}}, %c0_i32, %{{.*}} : i32
// CHECK: arith.select %{{.*}}, %{{.*}}, %c0_i32 : i32
// CHECK: nvvm.mma.sync
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: } else {
// CHECK: memref.store %{{.*}}, %arg4[%block_id_z, %{{.*}}, %{{.*}}] : memref<?x4x?xf32>
func.func @score_sketch_mma_half(%q: memref<?x4x128xf32>, %s: memref<?x1x13x128xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x128xf32>) summaries(%s : memref<?x1x13x128xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 64 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// CHECK-LABEL: func.func @score_sketch_cuda_three(
// CHECK: gpu.func @score_sketch_cuda_three_score_sketch(
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.barrier
func.func @score_sketch_cuda_three(%q: memref<?x3x128xf32>, %s: memref<?x1x13x128xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x3x?xf32>) {
  condensate.score_sketch q(%q : memref<?x3x128xf32>) summaries(%s : memref<?x1x13x128xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x3x?xf32>) {page_size = 64 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// Sketch scores of a group of 2 (on CUDA cores): 2 lanes a page of 16 tokens (a word row of 8 tokens
// each), 64 pages (1024 tokens) a block of 128 threads. A block wholly past
// the context only stores -inf. First a lane group of 16 lanes per page
// puts the page's terms in shared memory (a_c = q_c step_c 2^bits per head
// and channel, 132 floats a page with the padding that staggers the pages'
// banks; the constant term with the slack; the box bound); after
// the barrier each lane scores its row's 8 tokens for the group's 2 heads:
// a code becomes the float 1 + code / 16 by a shift, a mask and an or (no
// conversion) and enters each head's accumulator by one fma; the next
// chunk's words are loaded before the current chunk's arithmetic.
// CHECK-LABEL: func.func @score_sketch(
// CHECK: %[[T:.*]] = arith.ceildivsi %{{.*}}, %c1024 : index
// CHECK: gpu.launch_func @condensate_kernels::@score_sketch_score_sketch blocks in (%[[T]], {{.*}} threads in (%c128,
// CHECK: gpu.func @score_sketch_score_sketch({{.*}}) workgroup(%{{.*}} : memref<8448xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<128xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<128xf32, #gpu.address_space<workgroup>> {{.*}}) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 8 : i32}
// CHECK: scf.if
// CHECK: scf.for
// CHECK: vector.store %{{.*}} : memref<8448xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %thread_id_x{{.*}} to %c128{{.*}} step %c128
// CHECK: scf.if %{{.*}} -> ({{(f32, )+}}f32)
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, )+}}vector<4xf32>, vector<4xf32>)
// CHECK-COUNT-2: vector.load %{{.*}} : memref<8448xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NOT: arith.uitofp
// CHECK: arith.shli %{{.*}}, %c19_i32 : i32
// CHECK-NEXT: arith.constant 7864320 : i32
// CHECK-NEXT: arith.andi
// CHECK-NEXT: arith.constant 1065353216 : i32
// CHECK-NEXT: arith.ori
// CHECK-NEXT: arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT: math.fma
// CHECK-NEXT: math.fma
// CHECK: arith.constant 0xFF800000 : f32
// CHECK-NOT: memref<?x2x16x64
func.func @score_sketch(%q: memref<?x4x64xf32>, %s: memref<?x2x7x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x4x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x64xf32>) summaries(%s : memref<?x2x7x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x4x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// Sketch scores of a group whose a_c do not fit in shared memory at once
// (32 query heads of 512 channels: 64 KB a page): two passes of 16 heads,
// each its terms, a barrier, its tokens, and a barrier before the next
// pass overwrites the terms.
// CHECK-LABEL: func.func @score_sketch_passes(
// CHECK: gpu.func @score_sketch_passes_score_sketch({{.*}}) workgroup(%{{.*}} : memref<8196xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %c1
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @score_sketch_passes(%q: memref<?x32x512xf32>, %s: memref<?x1x7x512xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x32x?xf32>) {
  condensate.score_sketch q(%q : memref<?x32x512xf32>) summaries(%s : memref<?x1x7x512xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x32x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// Sketch scores for top-k alone: one row per kv head, each token's group
// max (maximumf over the heads' scaled bounds, the order select_topk ranks
// by), stored as vectors of 4 tokens into the kv head's row.
// CHECK-LABEL: func.func @score_sketch_group(
// CHECK: gpu.func @score_sketch_group_score_sketch(
// CHECK-COUNT-8: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: vector.from_elements
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: arith.addi
// CHECK-NEXT: vector.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %{{.*}}] {alignment = 16 : i64} : memref<?x2x?xf32>, vector<4xf32>
// CHECK: memref.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %{{.*}}] : memref<?x2x?xf32>
func.func @score_sketch_group(%q: memref<?x4x64xf32>, %s: memref<?x2x7x64xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x2x?xf32>) {
  condensate.score_sketch q(%q : memref<?x4x64xf32>) summaries(%s : memref<?x2x7x64xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x2x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// A group max over two passes of 16 heads: the second pass merges its max
// with the first's, read back from the row the same lane wrote.
// CHECK-LABEL: func.func @score_sketch_passes_group(
// CHECK: gpu.func @score_sketch_passes_group_score_sketch(
// CHECK: scf.if %{{.*}} -> (f32) {
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[PREV:.*]] = memref.load %arg4[%block_id_z, %block_id_y, %[[T:.*]]] : memref<?x1x?xf32>
// CHECK-NEXT: %[[MAX:.*]] = arith.maximumf %[[PREV]], %{{.*}} : f32
// CHECK-NEXT: scf.yield %[[MAX]] : f32
// CHECK: memref.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %[[T]]] : memref<?x1x?xf32>
func.func @score_sketch_passes_group(%q: memref<?x32x512xf32>, %s: memref<?x1x7x512xf32>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x1x?xf32>) {
  condensate.score_sketch q(%q : memref<?x32x512xf32>) summaries(%s : memref<?x1x7x512xf32>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x1x?xf32>) {page_size = 16 : i64, bits = 4 : i64, scale = 0.125 : f32}
  return
}

// -----

// Exact logits for top-k alone: the group's two scaled dot products, their
// max stored once, in the kv head's row.
// CHECK-LABEL: func.func @score_tokens_group(
// CHECK: gpu.func @score_tokens_group_score_tokens(
// CHECK: %[[S0:.*]] = arith.mulf %{{.*}}, %cst : f32
// CHECK-NEXT: %[[S1:.*]] = arith.mulf %{{.*}}, %cst : f32
// CHECK-NEXT: %[[M:.*]] = arith.maximumf %[[S0]], %[[S1]] : f32
// CHECK: %[[V:.*]] = arith.select %{{.*}}, %[[M]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[V]], %arg4[%block_id_z{{.*}}, %block_id_y, %{{.*}}] : memref<?x2x?xf32>
// CHECK-NOT: memref.store
// CHECK: gpu.return
func.func @score_tokens_group(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xbf16>, %pt: memref<?x?xi32>, %len: memref<?xi32>, %sc: memref<?x2x?xf32>) {
  condensate.score_tokens q(%q : memref<?x4x64xf32>) k(%k : memref<?x2x16x64xbf16>) pages(%pt : memref<?x?xi32>) lens(%len : memref<?xi32>) scores(%sc : memref<?x2x?xf32>) {scale = 0.125 : f32}
  return
}

// -----

// The certificate's early test: one block of 256 threads per (kv head,
// sequence) finds the rank end of the slots by shared unsigned-min and
// signed-max atomics, sums Zhat per head in f64 shared memory and leaves
// them with M in scratch; a grid over chunks of 1024 units adds Ulow (f64
// atomics, shared then global); a warp per group takes the test. Each f64
// partial is summed over its warp first (xor shuffles of its two 32-bit
// halves, 16 down to 1), and one lane a warp adds it to shared memory.
// CHECK-LABEL: func.func @precertify(
// CHECK: %[[M:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xf32>
// CHECK: %[[ZU:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2x2xf64>
// CHECK: %[[ST:.*]] = memref.alloc(%{{.*}}) : memref<?x2x4xi32>
// CHECK: gpu.launch_func @condensate_kernels::@precertify_precertify blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}}) threads in (%c256{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%arg0 : memref<?x4x64xf32>, %arg1 : memref<?x2x16x64xf16>, %arg2 : memref<?x?xi32>, %arg3 : memref<?x4x?xf32>, %arg3 : memref<?x4x?xf32>, %arg4 : memref<?xi32>, %arg5 : memref<?x2x6xi32>, %arg6 : memref<?x2xi32>, %[[M]] : memref<?x2x2xf32>, %[[ZU]] : memref<?x2x2x2xf64>, %[[ST]] : memref<?x2x4xi32>)
// CHECK: %[[CH:.*]] = arith.ceildivsi %{{.*}}, %c1024
// CHECK: gpu.launch_func @condensate_kernels::@precertify_precertify_low blocks in (%[[CH]], %c2{{(_[0-9]+)?}}, %{{.*}}) threads in (%c256
// CHECK: gpu.launch_func @condensate_kernels::@precertify_precertify_test blocks in (%c2{{(_[0-9]+)?}}, %{{.*}}, %c1{{(_[0-9]+)?}}) threads in (%c32{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}, %c1{{(_[0-9]+)?}}) args(%[[ZU]] : memref<?x2x2x2xf64>, %[[ST]] : memref<?x2x4xi32>, %arg6 : memref<?x2xi32>)
// CHECK: gpu.func @precertify_precertify({{.*}}) workgroup(%[[END:.*]] : memref<3xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[Z:.*]] : memref<2xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {{.*}}nvvm.maxntid = array<i32: 256, 1, 1>{{.*}} {
// CHECK: memref.atomic_rmw minu %{{.*}}, %[[END]][%{{.*}}]
// CHECK: memref.atomic_rmw maxs %{{.*}}, %[[END]][%{{.*}}]
// CHECK: arith.bitcast %{{.*}} : f64 to i64
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}} : i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}} : i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: arith.bitcast %{{.*}} : i64 to f64
// CHECK: scf.if
// CHECK-NEXT: memref.atomic_rmw addf %{{.*}}, %[[Z]][%{{.*}}] : (f64,
// CHECK: gpu.func @precertify_precertify_low(
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: scf.if
// CHECK-NEXT: memref.atomic_rmw addf %{{.*}} : (f64, memref<2xf64, #gpu.address_space<workgroup>>) -> f64
// CHECK: memref.atomic_rmw addf %{{.*}} : (f64, memref<?x2x2x2xf64>) -> f64
func.func @precertify(%q: memref<?x4x64xf32>, %k: memref<?x2x16x64xf16>, %pt: memref<?x?xi32>, %sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x6xi32>, %e: memref<?x2xi32>) {
  condensate.precertify token q(%q : memref<?x4x64xf32>) k(%k : memref<?x2x16x64xf16>) pages(%pt : memref<?x?xi32>) scores(%sc : memref<?x4x?xf32>) bounds(%sc : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x6xi32>) early(%e : memref<?x2xi32>) {anchor = 1 : i64, window = 16 : i64, window_max = 16 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-2 : f64, scale = 0.125 : f32}
  return
}

// -----

// Open extras over tokens with the sketches' page widths (200 extras: 7
// runs of 32 slots). The run sums hold U's column and Z's column of each
// head (4 columns for a group of 2); certify's fast walk takes suffix
// sums of U over the lanes (shuffles down) and prefix sums of Z (shuffles
// up), and its warps meet through shared memory: each warp's sums [8][4]
// and the found run's [8][U at its end, Z before it, Z at its end].
// CHECK-LABEL: func.func @certify_open_widths(
// CHECK: %[[RUNS:.*]] = memref.alloc(%{{.*}}) : memref<?x2x7x4xf64>
// CHECK: gpu.launch_func @condensate_kernels::@certify_open_widths_certify_sums {{.*}} args({{.*}}%arg8 : memref<?x4x?xf32>, %[[RUNS]] : memref<?x2x7x4xf64>)
// CHECK: gpu.launch_func @condensate_kernels::@certify_open_widths_certify blocks in {{.*}} args({{.*}}, %[[RUNS]] : memref<?x2x7x4xf64>)
// CHECK: gpu.func @certify_open_widths_certify_sums(
// CHECK-COUNT-4: math.exp
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}] : memref<?x2x7x4xf64>
// CHECK: gpu.func @certify_open_widths_certify({{.*}}) workgroup({{.*}}, %{{.*}} : memref<8x4xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<8x6xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel {
// CHECK: gpu.shuffle  down
// CHECK: gpu.shuffle  up
// CHECK: memref.atomic_rmw mins
func.func @certify_open_widths(%sc: memref<?x4x?xf32>, %len: memref<?xi32>, %idx: memref<?x2x204xi32>, %po: memref<?x4x1x64xf32>, %pml: memref<?x4x1x3xf32>, %e: memref<?x2xi32>, %f: memref<?x2xi32>, %st: memref<?x4x5xf32>, %w: memref<?x4x?xf32>) {
  condensate.certify token scores(%sc : memref<?x4x?xf32>) widths(%w : memref<?x4x?xf32>) lens(%len : memref<?xi32>) indices(%idx : memref<?x2x204xi32>) base(%po, %pml : memref<?x4x1x64xf32>, memref<?x4x1x3xf32>) extra(%e : memref<?x2xi32>) fallback(%f : memref<?x2xi32>) stats(%st : memref<?x4x5xf32>) {anchor = 1 : i64, window = 64 : i64, window_max = 64 : i64, page_size = 16 : i64, base_units = 4 : i64, tau = 1.0e-2 : f64}
  return
}
