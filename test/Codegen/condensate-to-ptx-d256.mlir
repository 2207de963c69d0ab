// head_dim 256 (Gemma 3's global layers): the tensor-core attention body
// runs only with a cp.async ring (by default one of 2 tiles a warp; a tile
// prefetched in registers beside a lane's accumulators would spill), so
// attend-stages=1 keeps it on lane groups of CUDA cores. No GPU is needed.
//
// RUN: condensate-opt --condensate-to-ptx %s > %t.mlir
// RUN: FileCheck %s --check-prefix=HOST --input-file=%t.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.mlir > %t.ptx
// RUN: FileCheck %s --check-prefix=RING --input-file=%t.ptx
// RUN: condensate-opt --condensate-to-ptx="attend-stages=1" %s > %t.lanes.mlir
// RUN: sed -e 's/\\0A/\n/g' -e 's/\\09/ /g' %t.lanes.mlir > %t.lanes.ptx
// RUN: FileCheck %s --check-prefix=LANES --input-file=%t.lanes.ptx

condensate.model @wide layers = 2, q_heads = 8, kv_heads = 1, head_dim = 256,
    page_size = 64, kv_type = bf16,
    schedule = #condensate.schedule<layers = 2,
      default = #condensate.dense,
      rules = [#condensate.rule<layers = [1],
                 policy = #condensate.policy<anchor = 1, window = 64,
                   topk = 256, selector = block_minmax, page_size = 64>>]>

// The ring's dynamic shared memory: 3 warps (the most an SM of sm_90
// holds at 2 blocks of 96 KB of ring and 16 KB of query fragments) x 2
// stages x 32 fragments x 32 lanes x 16 bytes.
// Its dense splits fill one wave of the chip at 2 such blocks an SM:
// ceil(256 / (batch x 1 kv head)), at most the 512 the buffers hold;
// from 128 sequences, two waves, ceil(512 / batch): the one wave plus
// [batch >= 128] times the difference (the arithmetic a launch plan
// expresses).
// HOST-LABEL: func.func @wide_layer0(
// HOST: %[[ROWS:.*]] = arith.maxsi %[[B:.*]], %c1 : index
// HOST: %[[WANT:.*]] = arith.ceildivsi %c256, %[[ROWS]] : index
// HOST: %[[ONE:.*]] = arith.minsi %[[WANT]], %c512 : index
// HOST: %[[WANT2:.*]] = arith.ceildivsi %c512, %[[ROWS]] : index
// HOST: %[[TWO:.*]] = arith.minsi %[[WANT2]], %c512 : index
// HOST: %[[OVER:.*]] = arith.addi %[[B]], %c-127 : index
// HOST: %[[POS:.*]] = arith.maxsi %[[OVER]], %c0 : index
// HOST: %[[MANY:.*]] = arith.minsi %[[POS]], %c1 : index
// HOST: %[[DIFF:.*]] = arith.subi %[[TWO]], %[[ONE]] : index
// HOST: %[[EXTRA:.*]] = arith.muli %[[MANY]], %[[DIFF]] : index
// HOST: %[[LIVE:.*]] = arith.addi %[[ONE]], %[[EXTRA]] : index
// HOST: gpu.launch_func @condensate_kernels::@wide_layer0_dense_attend blocks in (%[[LIVE]], %c1, %{{.*}}) threads in (%c96, %c1, %c1) dynamic_shared_memory_size %c98304_i32
// HOST-LABEL: func.func @wide_layer1(
// HOST: gpu.launch_func @condensate_kernels::@wide_layer1_sparse_attend blocks in ({{.*}}) threads in (%c96, %c1, %c1) dynamic_shared_memory_size %c98304_i32

// RING-LABEL: .visible .entry wide_layer0_dense_attend(
// RING-DAG: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
// RING-DAG: cp.async.wait_group 1;
// RING-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// RING-LABEL: .visible .entry wide_layer1_sparse_attend(
// RING-DAG: cp.async.wait_group 1;
// RING-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

// LANES-LABEL: .visible .entry wide_layer0_dense_attend(
// LANES-NOT: mma.sync
// LANES-NOT: cp.async
// LANES-LABEL: .visible .entry wide_layer1_sparse_attend(
