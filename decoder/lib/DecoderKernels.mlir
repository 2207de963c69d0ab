// The GPU decoder's non-attention kernels, written in the gpu dialect and
// compiled to PTX by the same NVVM lowering as the condensate kernels
// (GPUBackend.cpp embeds this file). Rows are independent tokens; every kernel
// takes its sizes from its memref arguments, so one PTX serves any model.
//
// Check it lowers: condensate-opt decoder/lib/DecoderKernels.mlir \
//   --pass-pipeline="builtin.module(nvvm-attach-target{chip=sm_90 features=+ptx80 O=3},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts),gpu-module-to-binary{format=isa})"
module attributes {gpu.container_module} {
gpu.module @decoder_kernels {

  // x[t, i] = table[tokens[t], i] * scale; grid (ceil(hidden / 256), rows).
  gpu.func @embed(%table: memref<?x?xf32>, %tokens: memref<?xi32>,
                  %x: memref<?x?xf32>, %scale: f32) kernel {
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %c1 = arith.constant 1 : index
    %hidden = memref.dim %x, %c1 : memref<?x?xf32>
    %in = arith.cmpi slt, %i, %hidden : index
    scf.if %in {
      %tok = memref.load %tokens[%t] : memref<?xi32>
      %row = arith.index_cast %tok : i32 to index
      %e = memref.load %table[%row, %i] : memref<?x?xf32>
      %v = arith.mulf %e, %scale : f32
      memref.store %v, %x[%t, %i] : memref<?x?xf32>
    }
    gpu.return
  }

  // y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w, or y[t] += that when
  // accumulate != 0; one 256-thread block per row: strided partial sums,
  // warp shuffles, then the 8 warp sums. y may be x (each thread reads an
  // element before it writes it, after the barrier). When round != 0, yb[t]
  // also gets y[t] rounded as round_bf16 rounds it: the input rows of the
  // bfloat16 projection that follows, without a round_bf16 launch.
  gpu.func @rmsnorm(%x: memref<?x?xf32>, %w: memref<?xf32>,
                    %y: memref<?x?xf32>, %yb: memref<?x?xbf16>, %eps: f32,
                    %accumulate: i32, %round: i32)
      workgroup(%red: memref<8xf32, #gpu.address_space<workgroup>>)
      kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c256 = arith.constant 256 : index
    %zero = arith.constant 0.0 : f32
    %tid = gpu.thread_id x
    %t = gpu.block_id x
    %n = memref.dim %x, %c1 : memref<?x?xf32>
    %part = scf.for %i = %tid to %n step %c256 iter_args(%acc = %zero) -> f32 {
      %v = memref.load %x[%t, %i] : memref<?x?xf32>
      %sq = arith.mulf %v, %v : f32
      %a = arith.addf %acc, %sq : f32
      scf.yield %a : f32
    }
    %w32 = arith.constant 32 : i32
    %o16 = arith.constant 16 : i32
    %o8 = arith.constant 8 : i32
    %o4 = arith.constant 4 : i32
    %o2 = arith.constant 2 : i32
    %o1 = arith.constant 1 : i32
    %s16, %v16 = gpu.shuffle xor %part, %o16, %w32 : f32
    %r16 = arith.addf %part, %s16 : f32
    %s8, %v8 = gpu.shuffle xor %r16, %o8, %w32 : f32
    %r8 = arith.addf %r16, %s8 : f32
    %s4, %v4 = gpu.shuffle xor %r8, %o4, %w32 : f32
    %r4 = arith.addf %r8, %s4 : f32
    %s2, %v2 = gpu.shuffle xor %r4, %o2, %w32 : f32
    %r2 = arith.addf %r4, %s2 : f32
    %s1, %v1 = gpu.shuffle xor %r2, %o1, %w32 : f32
    %warpSum = arith.addf %r2, %s1 : f32
    %lane = arith.remui %tid, %c32 : index
    %warp = arith.divui %tid, %c32 : index
    %isLane0 = arith.cmpi eq, %lane, %c0 : index
    scf.if %isLane0 {
      memref.store %warpSum, %red[%warp] : memref<8xf32, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    %c8 = arith.constant 8 : index
    %total = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> f32 {
      %v = memref.load %red[%k] : memref<8xf32, #gpu.address_space<workgroup>>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    %nI = arith.index_cast %n : index to i64
    %nF = arith.sitofp %nI : i64 to f32
    %mean = arith.divf %total, %nF : f32
    %me = arith.addf %mean, %eps : f32
    %inv = math.rsqrt %me : f32
    %zeroI = arith.constant 0 : i32
    %acc = arith.cmpi ne, %accumulate, %zeroI : i32
    %rnd = arith.cmpi ne, %round, %zeroI : i32
    scf.for %i = %tid to %n step %c256 {
      %v = memref.load %x[%t, %i] : memref<?x?xf32>
      %g = memref.load %w[%i] : memref<?xf32>
      %a = arith.mulf %v, %inv : f32
      %b = arith.mulf %a, %g : f32
      %old = memref.load %y[%t, %i] : memref<?x?xf32>
      %sum = arith.addf %old, %b : f32
      %r = arith.select %acc, %sum, %b : f32
      memref.store %r, %y[%t, %i] : memref<?x?xf32>
      scf.if %rnd {
        %rb = arith.truncf %r : f32 to bf16
        memref.store %rb, %yb[%t, %i] : memref<?x?xbf16>
      }
    }
    gpu.return
  }

  // Rotates head pairs of q and k in place: v[t] holds `heads` rows of
  // head_dim (q heads then k heads); pair i of a head is (2i, 2i+1) when
  // adjacent != 0 (llama.cpp's NORM) or (i, i + rot/2) otherwise (NEOX),
  // by angle positions[t] * invFreq[i]. Grid (heads, rows), one thread per
  // pair.
  gpu.func @rope(%v: memref<?x?x?xf32>, %positions: memref<?xi32>,
                 %invFreq: memref<?xf32>, %adjacent: i32) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %tid = gpu.thread_id x
    %h = gpu.block_id x
    %t = gpu.block_id y
    %pairs = memref.dim %invFreq, %c0 : memref<?xf32>
    %in = arith.cmpi slt, %tid, %pairs : index
    scf.if %in {
      %pos = memref.load %positions[%t] : memref<?xi32>
      %posF = arith.sitofp %pos : i32 to f32
      %f = memref.load %invFreq[%tid] : memref<?xf32>
      %angle = arith.mulf %posF, %f : f32
      %cos = math.cos %angle : f32
      %sin = math.sin %angle : f32
      %zero = arith.constant 0 : i32
      %adj = arith.cmpi ne, %adjacent, %zero : i32
      %twoI = arith.muli %tid, %c2 : index
      %twoI1 = arith.addi %twoI, %c1 : index
      %hi = arith.addi %tid, %pairs : index
      %a = arith.select %adj, %twoI, %tid : index
      %b = arith.select %adj, %twoI1, %hi : index
      %x0 = memref.load %v[%t, %h, %a] : memref<?x?x?xf32>
      %x1 = memref.load %v[%t, %h, %b] : memref<?x?x?xf32>
      %p0 = arith.mulf %x0, %cos : f32
      %p1 = arith.mulf %x1, %sin : f32
      %y0 = arith.subf %p0, %p1 : f32
      %q0 = arith.mulf %x0, %sin : f32
      %q1 = arith.mulf %x1, %cos : f32
      %y1 = arith.addf %q0, %q1 : f32
      memref.store %y0, %v[%t, %h, %a] : memref<?x?x?xf32>
      memref.store %y1, %v[%t, %h, %b] : memref<?x?x?xf32>
    }
    gpu.return
  }

  // act[t, i] = silu(gu[t, i]) * gu[t, ffn + i], and with round != 0 its
  // bf16 rounding in actb[t, i] (the down projection's input, as
  // rmsnorm's yb); grid (ceil(ffn/256), rows).
  gpu.func @silu_mul(%gu: memref<?x?xf32>, %act: memref<?x?xf32>,
                     %actb: memref<?x?xbf16>, %round: i32) kernel {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %ffn = memref.dim %act, %c1 : memref<?x?xf32>
    %in = arith.cmpi slt, %i, %ffn : index
    scf.if %in {
      %g = memref.load %gu[%t, %i] : memref<?x?xf32>
      %j = arith.addi %i, %ffn : index
      %u = memref.load %gu[%t, %j] : memref<?x?xf32>
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %s = arith.divf %g, %den : f32
      %r = arith.mulf %s, %u : f32
      memref.store %r, %act[%t, %i] : memref<?x?xf32>
      %zeroI = arith.constant 0 : i32
      %rnd = arith.cmpi ne, %round, %zeroI : i32
      scf.if %rnd {
        %rb = arith.truncf %r : f32 to bf16
        memref.store %rb, %actb[%t, %i] : memref<?x?xbf16>
      }
    }
    gpu.return
  }

  // act[t, i] = gelu(gu[t, i]) * gu[t, ffn + i] with gelu's tanh form,
  // 0.5 g (1 + tanh(v)), v = sqrt(2/pi) (g + 0.044715 g^3), and tanh(|v|) =
  // (1 - e) / (1 + e), e = exp(-2|v|) <= 1 (no overflow); actb and round
  // as in silu_mul; grid (ceil(ffn/256), rows).
  gpu.func @gelu_mul(%gu: memref<?x?xf32>, %act: memref<?x?xf32>,
                     %actb: memref<?x?xbf16>, %round: i32) kernel {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %ffn = memref.dim %act, %c1 : memref<?x?xf32>
    %in = arith.cmpi slt, %i, %ffn : index
    scf.if %in {
      %g = memref.load %gu[%t, %i] : memref<?x?xf32>
      %j = arith.addi %i, %ffn : index
      %u = memref.load %gu[%t, %j] : memref<?x?xf32>
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %k = arith.constant 0.7978845608028654 : f32
      %c = arith.constant 0.044715 : f32
      %mtwo = arith.constant -2.0 : f32
      %g2 = arith.mulf %g, %g : f32
      %g3 = arith.mulf %g2, %g : f32
      %cg3 = arith.mulf %c, %g3 : f32
      %inner = arith.addf %g, %cg3 : f32
      %v = arith.mulf %k, %inner : f32
      %av = math.absf %v : f32
      %x = arith.mulf %mtwo, %av : f32
      %e = math.exp %x : f32
      %num = arith.subf %one, %e : f32
      %den = arith.addf %one, %e : f32
      %th = arith.divf %num, %den : f32
      %copy = math.copysign %th, %v : f32
      %onep = arith.addf %one, %copy : f32
      %hg = arith.mulf %half, %g : f32
      %gel = arith.mulf %hg, %onep : f32
      %r = arith.mulf %gel, %u : f32
      memref.store %r, %act[%t, %i] : memref<?x?xf32>
      %zeroI = arith.constant 0 : i32
      %rnd = arith.cmpi ne, %round, %zeroI : i32
      scf.if %rnd {
        %rb = arith.truncf %r : f32 to bf16
        memref.store %rb, %actb[%t, %i] : memref<?x?xbf16>
      }
    }
    gpu.return
  }

  // Splits the fused projection's rows into the contiguous q, k and v the
  // attention and append kernels read: q[t] = qkv[t, 0:qd], k[t] =
  // qkv[t, qd:qd+kd], v[t] = qkv[t, qd+kd:]; grid (ceil(qkv width / 256),
  // rows).
  gpu.func @split_qkv(%qkv: memref<?x?xf32>, %q: memref<?x?xf32>,
                      %k: memref<?x?xf32>, %v: memref<?x?xf32>) kernel {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %n = memref.dim %qkv, %c1 : memref<?x?xf32>
    %qd = memref.dim %q, %c1 : memref<?x?xf32>
    %kd = memref.dim %k, %c1 : memref<?x?xf32>
    %in = arith.cmpi slt, %i, %n : index
    scf.if %in {
      %x = memref.load %qkv[%t, %i] : memref<?x?xf32>
      %isQ = arith.cmpi slt, %i, %qd : index
      scf.if %isQ {
        memref.store %x, %q[%t, %i] : memref<?x?xf32>
      } else {
        %j = arith.subi %i, %qd : index
        %isK = arith.cmpi slt, %j, %kd : index
        scf.if %isK {
          memref.store %x, %k[%t, %j] : memref<?x?xf32>
        } else {
          %m = arith.subi %j, %kd : index
          memref.store %x, %v[%t, %m] : memref<?x?xf32>
        }
      }
    }
    gpu.return
  }

  // split_qkv and the rope of q's and k's heads in one kernel: block (h, t)
  // takes head h of row t of the fused projection (q's heads, then k's,
  // then v's: head h's elements start at column h * head_dim), thread i
  // elements (2i, 2i + 1) of it, or for i < invFreq's size on a q or k head
  // the pair @rope rotates (the same arithmetic, so the same values).
  // With hasBias != 0 the projection's bias is added first, as @add_bias
  // adds it. Grid (qHeads + 2 kvHeads, rows), at least head_dim / 2
  // threads.
  gpu.func @split_rope(%qkv: memref<?x?xf32>, %q: memref<?x?x?xf32>,
                       %k: memref<?x?x?xf32>, %v: memref<?x?x?xf32>,
                       %positions: memref<?xi32>, %invFreq: memref<?xf32>,
                       %adjacent: i32, %bias: memref<?xf32>,
                       %hasBias: i32) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %tid = gpu.thread_id x
    %h = gpu.block_id x
    %t = gpu.block_id y
    %qh = memref.dim %q, %c1 : memref<?x?x?xf32>
    %kh = memref.dim %k, %c1 : memref<?x?x?xf32>
    %d = memref.dim %q, %c2 : memref<?x?x?xf32>
    %halfD = arith.divui %d, %c2 : index
    %pairs = memref.dim %invFreq, %c0 : memref<?xf32>
    %in = arith.cmpi slt, %tid, %halfD : index
    scf.if %in {
      %qkh = arith.addi %qh, %kh : index
      %isQ = arith.cmpi slt, %h, %qh : index
      %isQK = arith.cmpi slt, %h, %qkh : index
      %base = arith.muli %h, %d : index
      %twoI = arith.muli %tid, %c2 : index
      %twoI1 = arith.addi %twoI, %c1 : index
      %isPair = arith.cmpi slt, %tid, %pairs : index
      %rot = arith.andi %isQK, %isPair : i1
      %zero = arith.constant 0 : i32
      %adj = arith.cmpi ne, %adjacent, %zero : i32
      %hiI = arith.addi %tid, %pairs : index
      %ra = arith.select %adj, %twoI, %tid : index
      %rb = arith.select %adj, %twoI1, %hiI : index
      %a = arith.select %rot, %ra, %twoI : index
      %b = arith.select %rot, %rb, %twoI1 : index
      %ca = arith.addi %base, %a : index
      %cb = arith.addi %base, %b : index
      %u0 = memref.load %qkv[%t, %ca] : memref<?x?xf32>
      %u1 = memref.load %qkv[%t, %cb] : memref<?x?xf32>
      %withBias = arith.cmpi ne, %hasBias, %zero : i32
      %x0, %x1 = scf.if %withBias -> (f32, f32) {
        %b0 = memref.load %bias[%ca] : memref<?xf32>
        %b1 = memref.load %bias[%cb] : memref<?xf32>
        %s0 = arith.addf %u0, %b0 : f32
        %s1 = arith.addf %u1, %b1 : f32
        scf.yield %s0, %s1 : f32, f32
      } else {
        scf.yield %u0, %u1 : f32, f32
      }
      %y0, %y1 = scf.if %rot -> (f32, f32) {
        %pos = memref.load %positions[%t] : memref<?xi32>
        %posF = arith.sitofp %pos : i32 to f32
        %f = memref.load %invFreq[%tid] : memref<?xf32>
        %angle = arith.mulf %posF, %f : f32
        %cos = math.cos %angle : f32
        %sin = math.sin %angle : f32
        %p0 = arith.mulf %x0, %cos : f32
        %p1 = arith.mulf %x1, %sin : f32
        %r0 = arith.subf %p0, %p1 : f32
        %q0 = arith.mulf %x0, %sin : f32
        %q1 = arith.mulf %x1, %cos : f32
        %r1 = arith.addf %q0, %q1 : f32
        scf.yield %r0, %r1 : f32, f32
      } else {
        scf.yield %x0, %x1 : f32, f32
      }
      scf.if %isQ {
        memref.store %y0, %q[%t, %h, %a] : memref<?x?x?xf32>
        memref.store %y1, %q[%t, %h, %b] : memref<?x?x?xf32>
      } else {
        scf.if %isQK {
          %hk = arith.subi %h, %qh : index
          memref.store %y0, %k[%t, %hk, %a] : memref<?x?x?xf32>
          memref.store %y1, %k[%t, %hk, %b] : memref<?x?x?xf32>
        } else {
          %hv = arith.subi %h, %qkh : index
          memref.store %y0, %v[%t, %hv, %a] : memref<?x?x?xf32>
          memref.store %y1, %v[%t, %hv, %b] : memref<?x?x?xf32>
        }
      }
    }
    gpu.return
  }

  // y[t, i] += b[i]; grid (ceil(n/256), rows).
  gpu.func @add_bias(%y: memref<?x?xf32>, %b: memref<?xf32>) kernel {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %n = memref.dim %y, %c1 : memref<?x?xf32>
    %in = arith.cmpi slt, %i, %n : index
    scf.if %in {
      %v = memref.load %y[%t, %i] : memref<?x?xf32>
      %c = memref.load %b[%i] : memref<?xf32>
      %s = arith.addf %v, %c : f32
      memref.store %s, %y[%t, %i] : memref<?x?xf32>
    }
    gpu.return
  }

  // y[t, i] = bf16(x[t, i]), round to nearest even (cvt.rn.bf16.f32), NaN
  // kept NaN: a projection's input rows for its bfloat16 weights (cuBLAS
  // multiplies bf16 by bf16 only); grid (ceil(n/256), rows).
  gpu.func @round_bf16(%x: memref<?x?xf32>, %y: memref<?x?xbf16>) kernel {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %tid = gpu.thread_id x
    %bx = gpu.block_id x
    %t = gpu.block_id y
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tid : index
    %n = memref.dim %y, %c1 : memref<?x?xbf16>
    %in = arith.cmpi slt, %i, %n : index
    scf.if %in {
      %v = memref.load %x[%t, %i] : memref<?x?xf32>
      %b = arith.truncf %v : f32 to bf16
      memref.store %b, %y[%t, %i] : memref<?x?xbf16>
    }
    gpu.return
  }
}
}
