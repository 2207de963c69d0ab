//===- KernelBuilder.cpp - GPU kernel creation and launch -----------------===//
//
// Implements NVVMTargetInfo, KernelBuilder (kernels in one gpu.module,
// launch bounds, shared buffers) and the host-side launch of a kernel.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

Value NVVMTargetInfo::shuffleXor(Emitter &e, Value v, int64_t offset) const {
  return shuffle(e, v, offset, gpu::ShuffleMode::XOR);
}

void NVVMTargetInfo::barrier(Emitter &e) const {
  gpu::BarrierOp::create(e.builder(), e.location());
}

const TargetInfo &mlir::condensate::kernel::nvvmTarget() {
  static const NVVMTargetInfo target;
  return target;
}

int64_t mlir::condensate::kernel::computeCapability(StringRef chip) {
  if (!chip.consume_front("sm_"))
    return 0;
  chip.consume_back("a");
  chip.consume_back("f");
  int64_t cc = 0;
  if (chip.getAsInteger(10, cc) || cc < 0)
    return 0;
  return cc;
}

int64_t mlir::condensate::kernel::sharedBytesOptin(StringRef chip) {
  constexpr int64_t kDefault = kStaticSharedBytes; // without opting in
  switch (computeCapability(chip)) {
  case 70:
  case 72:
    return 96 * 1024;
  case 75:
    return 64 * 1024;
  case 80:
  case 87:
    return 163 * 1024;
  case 86:
  case 89:
  case 120:
  case 121:
    return 99 * 1024;
  case 90:
  case 100:
  case 103:
    return 227 * 1024;
  default:
    return kDefault;
  }
}

int64_t KernelBuilder::sharedBytesOptin() const {
  gpu::GPUModuleOp module = kernels; // op handles have no const methods
  if (auto a = module->getAttrOfType<IntegerAttr>(kSharedOptinAttr))
    return a.getInt();
  return kernel::sharedBytesOptin("");
}

bool KernelBuilder::tensorCores() const {
  gpu::GPUModuleOp module = kernels;
  return module->hasAttr(kTensorCoresAttr);
}

int64_t KernelBuilder::attendWarps() const {
  gpu::GPUModuleOp module = kernels;
  if (auto a = module->getAttrOfType<IntegerAttr>(kAttendWarpsAttr))
    return a.getInt();
  return 0;
}

int64_t KernelBuilder::attendStages() const {
  gpu::GPUModuleOp module = kernels;
  if (auto a = module->getAttrOfType<IntegerAttr>(kAttendStagesAttr))
    return a.getInt();
  return 0;
}

int64_t KernelBuilder::attendOccupancy() const {
  gpu::GPUModuleOp module = kernels;
  if (auto a = module->getAttrOfType<IntegerAttr>(kAttendOccupancyAttr))
    return a.getInt();
  return 0;
}

int64_t KernelBuilder::sketchOccupancy() const {
  gpu::GPUModuleOp module = kernels;
  if (auto a = module->getAttrOfType<IntegerAttr>(kSketchOccupancyAttr))
    return a.getInt();
  return 0;
}

Value mlir::condensate::kernel::dynamicSharedArray(Emitter &e,
                                                   ArrayRef<int64_t> shape,
                                                   Type elt) {
  MLIRContext *ctx = e.builder().getContext();
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto raw = MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8),
                             MemRefLayoutAttrInterface(), space);
  Value bytes =
      gpu::DynamicSharedMemoryOp::create(e.builder(), e.location(), raw);
  auto typed = MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), space);
  return memref::ViewOp::create(e.builder(), e.location(), typed, bytes,
                                e.idx(0), ValueRange{});
}

Value mlir::condensate::kernel::shuffle(Emitter &e, Value v, int64_t offset,
                                        gpu::ShuffleMode mode) {
  Value off = e.i32(offset), width = e.i32(kWarp);
  return gpu::ShuffleOp::create(e.builder(), e.location(), v, off, width, mode)
      .getShuffleResult();
}

SmallVector<Value> mlir::condensate::kernel::mmaBF16(GPUEmitter &e,
                                                     ArrayRef<Value> a,
                                                     ArrayRef<Value> b,
                                                     ArrayRef<Value> c) {
  OpBuilder &bd = e.builder();
  Type f32 = bd.getF32Type();
  auto result = LLVM::LLVMStructType::getLiteral(e.ctx(), {f32, f32, f32, f32});
  auto op = NVVM::MmaOp::create(
      bd, e.location(), result, a, b, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16, NVVM::MMATypes::bf16},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(
        LLVM::ExtractValueOp::create(bd, e.location(), op.getRes(), i));
  return out;
}

Value mlir::condensate::kernel::packBF16(GPUEmitter &e, Value x, Value y) {
  OpBuilder &bd = e.builder();
  Value pair = vector::FromElementsOp::create(
      bd, e.location(), VectorType::get({2}, bd.getBF16Type()),
      ValueRange{x, y});
  Value word = vector::BitCastOp::create(
      bd, e.location(), VectorType::get({1}, bd.getI32Type()), pair);
  return e.extractElt(word, 0);
}

Value mlir::condensate::kernel::transposeB16(GPUEmitter &e, Value word) {
  // Side effects keep the warp-wide exchange where the emitter put it.
  return LLVM::InlineAsmOp::create(
             e.builder(), e.location(), e.builder().getI32Type(),
             ValueRange{word}, "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;",
             "=r,r", /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getRes();
}

Value mlir::condensate::kernel::lop3(GPUEmitter &e, Value a, Value b, Value c,
                                     uint8_t lut) {
  std::string text = "lop3.b32 $0, $1, $2, $3, " + std::to_string(lut) + ";";
  return LLVM::InlineAsmOp::create(
             e.builder(), e.location(), e.builder().getI32Type(),
             ValueRange{a, b, c}, text, "=r,r,r,r", /*has_side_effects=*/false,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getRes();
}

Value mlir::condensate::kernel::opaque(GPUEmitter &e, Value v) {
  OpBuilder &bd = e.builder();
  Location loc = e.location();
  auto type = cast<VectorType>(v.getType());
  int64_t bits = type.getNumElements() * type.getElementTypeBitWidth();
  if (bits % 32 != 0) // no such row today (rows are 16-byte loads)
    return v;
  Type i32 = bd.getI32Type();
  auto wordsType = VectorType::get({bits / 32}, i32);
  Value words = vector::BitCastOp::create(bd, loc, wordsType, v);
  SmallVector<Value> in;
  std::string outs, ties;
  for (int64_t i = 0; i < bits / 32; ++i) {
    in.push_back(e.extractElt(words, i));
    outs += (i ? ",=r" : "=r");
    ties += "," + std::to_string(i);
  }
  auto structType = LLVM::LLVMStructType::getLiteral(
      bd.getContext(), SmallVector<Type>(in.size(), i32));
  Value tied =
      LLVM::InlineAsmOp::create(bd, loc, structType, in, "", outs + ties,
                                /*has_side_effects=*/false,
                                /*is_align_stack=*/false,
                                LLVM::tailcallkind::TailCallKind::None,
                                LLVM::AsmDialectAttr(), ArrayAttr())
          .getRes();
  SmallVector<Value> out;
  for (int64_t i = 0; i < bits / 32; ++i)
    out.push_back(LLVM::ExtractValueOp::create(bd, loc, tied, i));
  Value joined = vector::FromElementsOp::create(bd, loc, wordsType, out);
  return vector::BitCastOp::create(bd, loc, type, joined);
}

Value mlir::condensate::kernel::opaqueIndex(GPUEmitter &e, Value i) {
  Value word = vector::FromElementsOp::create(
      e.builder(), e.location(), VectorType::get({1}, e.builder().getI32Type()),
      ValueRange{e.toI32(i)});
  return e.toIndex(e.extractElt(opaque(e, word), 0));
}

Value GPUEmitter::shuffleF64(Value v, const std::function<Value(Value)> &move) {
  OpBuilder &b = builder();
  Location loc = location();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value c32 = arith::ConstantIntOp::create(b, loc, i64, 32);
  Value bits = arith::BitcastOp::create(b, loc, i64, v);
  Value lo = move(arith::TruncIOp::create(b, loc, i32, bits));
  Value hi = move(arith::TruncIOp::create(
      b, loc, i32, arith::ShRUIOp::create(b, loc, bits, c32)));
  Value joined = arith::OrIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i64, lo),
      arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, hi),
                            c32));
  return arith::BitcastOp::create(b, loc, b.getF64Type(), joined);
}

Value GPUEmitter::warpSumF64(Value v) {
  for (int64_t offset = kWarp / 2; offset >= 1; offset /= 2)
    v = fadd(v, shuffleF64(v, [&](Value x) { return shuffleXor(x, offset); }));
  return v;
}

Value GPUEmitter::warpPrefixF64(Value v, Value lane) {
  return warpScan(
      v, lane, /*down=*/false,
      [&](Value x, int64_t o) {
        return shuffleF64(x, [&](Value h) { return shuffleUp(h, o); });
      },
      [&](Value x, Value y) { return fadd(x, y); });
}

Value GPUEmitter::warpSuffixF64(Value v, Value lane) {
  return warpScan(
      v, lane, /*down=*/true,
      [&](Value x, int64_t o) {
        return shuffleF64(x, [&](Value h) { return shuffleDown(h, o); });
      },
      [&](Value x, Value y) { return fadd(x, y); });
}

void GPUEmitter::warpAtomicAddF64(Value mem, ValueRange ivs, Value v) {
  Value sum = warpSumF64(v);
  SmallVector<Value> at(ivs.begin(), ivs.end());
  ifThen(eq(rems(tid(), idx(kWarp)), idx(0)), [&](Emitter &ee) {
    static_cast<GPUEmitter &>(ee).atomicAddF64(mem, at, sum);
  });
}

gpu::GPUFuncOp KernelBuilder::createKernel(
    StringRef base, ValueRange operands, ArrayRef<Type> workgroup,
    const std::function<void(GPUEmitter &, ValueRange, ValueRange)> &body)
    const {
  std::string name = uniqueName(base);
  gpu::GPUModuleOp module = kernels; // op handles have no const methods
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  SmallVector<Type> types(operands.getTypes());
  auto fnType = b.getFunctionType(types, {});
  auto fn = gpu::GPUFuncOp::create(b, module.getLoc(), name, fnType, workgroup,
                                   TypeRange{});
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // Shared buffers are 16-byte aligned: LLVM merges neighbouring scalar
  // accesses into 16-byte vector ones, which need that alignment.
  for (unsigned i = 0; i < workgroup.size(); ++i)
    fn.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(16));
  Block &entry = fn.getBody().front();
  OpBuilder kb = OpBuilder::atBlockBegin(&entry);
  if (module->hasAttr(kGridDependencyAttrName)) {
    // Before any memory access: the previous grid's writes are visible
    // once the wait returns; the next grid may then be launched, its
    // blocks waiting in turn.
    fn->setAttr(kGridDependencyAttrName, b.getUnitAttr());
    NVVM::GriddepcontrolOp::create(kb, fn.getLoc(),
                                   NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(kb, fn.getLoc(),
                                   NVVM::GridDepActionKind::launch_dependents);
  }
  GPUEmitter e(kb, fn.getLoc());
  SmallVector<Value> args(fn.getArguments());
  SmallVector<Value> wg(fn.getWorkgroupAttributions());
  body(e, args, wg);
  gpu::ReturnOp::create(kb, fn.getLoc());
  return fn;
}

void KernelBuilder::launchBounds(gpu::GPUFuncOp fn, int64_t threads,
                                 int64_t minBlocks) {
  Builder b(fn.getContext());
  fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
              b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
              b.getI32IntegerAttr(static_cast<int32_t>(minBlocks)));
}

int64_t KernelBuilder::workgroupBytes(ArrayRef<Type> workgroup) {
  int64_t bytes = 0;
  for (Type t : workgroup) {
    auto m = cast<MemRefType>(t);
    bytes += m.getNumElements() * m.getElementTypeBitWidth() / 8;
  }
  return bytes;
}

MemRefType KernelBuilder::workgroupType(MLIRContext *ctx,
                                        ArrayRef<int64_t> shape, Type elt) {
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  return MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), space);
}

std::string KernelBuilder::uniqueName(StringRef base) const {
  std::string name = base.str();
  for (int i = 0; SymbolTable::lookupSymbolIn(kernels, name); ++i)
    name = (base + "_" + Twine(i)).str();
  return name;
}

void mlir::condensate::kernel::launch(OpBuilder &b, Location loc,
                                      gpu::GPUFuncOp fn, Value x, Value y,
                                      Value z, int64_t threads,
                                      ValueRange operands,
                                      int64_t dynamicShared) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value t = arith::ConstantIndexOp::create(b, loc, threads);
  Value shared;
  if (dynamicShared > 0)
    shared = arith::ConstantIntOp::create(b, loc, dynamicShared, 32);
  auto op =
      gpu::LaunchFuncOp::create(b, loc, fn, gpu::KernelDim3{x, y, z},
                                gpu::KernelDim3{t, one, one}, shared, operands);
  if (fn->hasAttr(kGridDependencyAttrName))
    op->setAttr(kGridDependencyAttrName, b.getUnitAttr());
}

void mlir::condensate::kernel::launchPerGroup(OpBuilder &b, Location loc,
                                              gpu::GPUFuncOp fn, Value batched,
                                              int64_t hkv, int64_t threads,
                                              ValueRange operands,
                                              int64_t dynamicShared) {
  Value batch = memref::DimOp::create(b, loc, batched, 0);
  launch(b, loc, fn, arith::ConstantIndexOp::create(b, loc, hkv), batch,
         arith::ConstantIndexOp::create(b, loc, 1), threads, operands,
         dynamicShared);
}

std::string mlir::condensate::kernel::kernelName(Operation *op,
                                                 StringRef stage) {
  auto fn = op->getParentOfType<func::FuncOp>();
  return ((fn ? fn.getSymName() : StringRef("kernel")) + "_" + stage).str();
}
