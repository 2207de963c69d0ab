//===- ExtractLaunchPlan.cpp - host functions to launch plans -------------===//
//
// Implements extractLaunchPlan and the test pass that prints it: after
// convert-condensate-to-gpu, each host function is a sequence of scratch
// allocations, subviews and gpu.launch_func ops whose sizes are arithmetic
// on argument dimensions. The plan writes each as an expression, so the
// MLIR-free runtime (or any engine) can launch the kernels from the
// manifest alone.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/LaunchPlan.h"
#include "condensate/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONDENSATETESTLAUNCHPLAN
#include "condensate/Codegen/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using ::condensate::BufferRef;
using ::condensate::Expr;
using ::condensate::FunctionPlan;
using ::condensate::KernelLaunch;
using ::condensate::LaunchPlan;
using ::condensate::MemRefParam;
using ::condensate::Result;
using ::condensate::ScratchBuffer;
using ::condensate::Status;

namespace {

/// Reads a host function after convert-condensate-to-gpu as a plan.
class FunctionPlanExtractor {
public:
  explicit FunctionPlanExtractor(mlir::func::FuncOp fn) : fn(fn) {}

  Result<FunctionPlan> run() {
    FunctionPlan plan;
    plan.name = fn.getSymName().str();
    plan.numArgs = fn.getNumArguments();
    Status failure = Status::success();
    fn.walk([&](mlir::Operation *op) {
      if (!failure.ok())
        return;
      if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op)) {
        ScratchBuffer buffer;
        auto type = alloc.getType();
        buffer.elementType = typeName(type.getElementType());
        buffer.elementBytes = bytesOf(type.getElementType());
        for (int64_t d = 0; d < type.getRank(); ++d) {
          auto e = dimOf(alloc.getResult(), d);
          if (!e.ok()) {
            failure = e.status();
            return;
          }
          buffer.shape.push_back(*e);
        }
        scratch[alloc.getResult()] = plan.scratch.size();
        plan.scratch.push_back(buffer);
        return;
      }
      if (auto launch = mlir::dyn_cast<mlir::gpu::LaunchFuncOp>(op)) {
        auto l = launchOf(launch);
        if (!l.ok()) {
          failure = l.status();
          return;
        }
        plan.launches.push_back(*l);
      }
    });
    if (!failure.ok())
      return failure.withContext("launch plan of @" + plan.name);
    return plan;
  }

private:
  static std::string typeName(mlir::Type t) {
    if (t.isF64())
      return "f64";
    if (t.isF32())
      return "f32";
    if (t.isF16())
      return "f16";
    if (t.isBF16())
      return "bf16";
    if (t.isInteger(32))
      return "i32";
    if (t.isInteger(8))
      return "i8";
    return "?";
  }
  static int64_t bytesOf(mlir::Type t) {
    return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
  }

  Result<Expr> expr(Value v) {
    if (auto c = v.getDefiningOp<mlir::arith::ConstantIndexOp>())
      return Expr::constant(c.value());
    if (auto dim = v.getDefiningOp<mlir::memref::DimOp>()) {
      auto idx = dim.getConstantIndex();
      if (!idx)
        return Status::error("memref.dim with a dynamic index");
      return dimOf(dim.getSource(), *idx);
    }
    // k(x, y), folded where both are constants.
    auto combine = [](Expr::Kind k, Expr x, Expr y) -> Expr {
      if (x.isConstant() && y.isConstant()) {
        int64_t p = x.value, q = y.value;
        switch (k) {
        case Expr::Kind::Add:
          return Expr::constant(p + q);
        case Expr::Kind::Mul:
          return Expr::constant(p * q);
        case Expr::Kind::CeilDiv:
          return Expr::constant((p + q - 1) / q);
        case Expr::Kind::Max:
          return Expr::constant(std::max(p, q));
        case Expr::Kind::Min:
          return Expr::constant(std::min(p, q));
        default:
          break;
        }
      }
      return Expr::binary(k, std::move(x), std::move(y));
    };
    auto binary = [&](Expr::Kind k, Value a, Value b) -> Result<Expr> {
      auto x = expr(a);
      if (!x.ok())
        return x;
      auto y = expr(b);
      if (!y.ok())
        return y;
      return combine(k, *x, *y);
    };
    mlir::Operation *op = v.getDefiningOp();
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::AddIOp>(op))
      return binary(Expr::Kind::Add, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::MulIOp>(op))
      return binary(Expr::Kind::Mul, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::SubIOp>(op)) {
      // a - b as a + b * -1 (canonicalisation makes a subtraction of the
      // latter).
      auto x = expr(o.getLhs());
      if (!x.ok())
        return x;
      auto y = expr(o.getRhs());
      if (!y.ok())
        return y;
      return combine(Expr::Kind::Add, *x,
                     combine(Expr::Kind::Mul, *y, Expr::constant(-1)));
    }
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::CeilDivSIOp>(op))
      return binary(Expr::Kind::CeilDiv, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::CeilDivUIOp>(op))
      return binary(Expr::Kind::CeilDiv, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::MaxSIOp>(op))
      return binary(Expr::Kind::Max, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::MinSIOp>(op))
      return binary(Expr::Kind::Min, o.getLhs(), o.getRhs());
    std::string what = op ? op->getName().getStringRef().str() : "argument";
    return Status::error("cannot express a value defined by " + what +
                         " in a launch plan");
  }

  Result<Expr> dimOf(Value memref, int64_t d) {
    auto type = mlir::cast<mlir::MemRefType>(memref.getType());
    if (!type.isDynamicDim(d))
      return Expr::constant(type.getDimSize(d));
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(memref))
      return Expr::argDim(arg.getArgNumber(), d);
    mlir::Operation *op = memref.getDefiningOp();
    if (auto cast = mlir::dyn_cast_or_null<mlir::memref::CastOp>(op))
      return dimOf(cast.getSource(), d);
    if (auto alloc = mlir::dyn_cast_or_null<mlir::memref::AllocOp>(op))
      return expr(alloc.getDynamicSizes()[type.getDynamicDimIndex(d)]);
    if (auto sv = mlir::dyn_cast_or_null<mlir::memref::SubViewOp>(op)) {
      auto sizes = sv.getMixedSizes();
      if (auto attr = mlir::dyn_cast<mlir::Attribute>(sizes[d]))
        return Expr::constant(mlir::cast<mlir::IntegerAttr>(attr).getInt());
      return expr(mlir::cast<Value>(sizes[d]));
    }
    return Status::error("cannot follow the dimensions of a memref defined "
                         "by " +
                         (op ? op->getName().getStringRef().str()
                             : std::string("?")));
  }

  Result<MemRefParam> memrefOf(Value v) {
    auto type = mlir::cast<mlir::MemRefType>(v.getType());
    MemRefParam p;
    p.elementType = typeName(type.getElementType());
    p.elementBytes = bytesOf(type.getElementType());
    auto rowMajor = [&](MemRefParam &param) {
      param.strides.assign(param.sizes.size(), Expr::constant(1));
      for (int64_t i = static_cast<int64_t>(param.sizes.size()) - 2; i >= 0;
           --i) {
        Expr s = Expr::binary(Expr::Kind::Mul, param.strides[i + 1],
                              param.sizes[i + 1]);
        if (s.operands[0].isConstant() && s.operands[1].isConstant())
          s = Expr::constant(s.operands[0].value * s.operands[1].value);
        param.strides[i] = s;
      }
    };
    auto sizes = [&](MemRefParam &param) -> Status {
      for (int64_t d = 0; d < type.getRank(); ++d) {
        auto e = dimOf(v, d);
        if (!e.ok())
          return e.status();
        param.sizes.push_back(*e);
      }
      return Status::success();
    };
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      p.buffer = {BufferRef::Kind::Argument,
                  static_cast<int64_t>(arg.getArgNumber())};
      p.offset = Expr::constant(0);
      CONDENSATE_RETURN_IF_ERROR(sizes(p));
      rowMajor(p);
      return p;
    }
    mlir::Operation *op = v.getDefiningOp();
    if (auto alloc = mlir::dyn_cast_or_null<mlir::memref::AllocOp>(op)) {
      auto it = scratch.find(v);
      if (it == scratch.end())
        return Status::error("a kernel uses a buffer before its allocation");
      p.buffer = {BufferRef::Kind::Scratch, it->second};
      p.offset = Expr::constant(0);
      CONDENSATE_RETURN_IF_ERROR(sizes(p));
      rowMajor(p);
      return p;
    }
    if (auto cast = mlir::dyn_cast_or_null<mlir::memref::CastOp>(op)) {
      auto src = memrefOf(cast.getSource());
      if (!src.ok())
        return src;
      MemRefParam out = *src;
      out.sizes.clear();
      CONDENSATE_RETURN_IF_ERROR(sizes(out));
      return out;
    }
    if (auto sv = mlir::dyn_cast_or_null<mlir::memref::SubViewOp>(op)) {
      auto src = memrefOf(sv.getSource());
      if (!src.ok())
        return src;
      if (sv.getType().getRank() != sv.getSourceType().getRank())
        return Status::error("rank-reducing subviews are not supported");
      auto value = [&](mlir::OpFoldResult r) -> Result<Expr> {
        if (auto attr = mlir::dyn_cast<mlir::Attribute>(r))
          return Expr::constant(mlir::cast<mlir::IntegerAttr>(attr).getInt());
        return expr(mlir::cast<Value>(r));
      };
      MemRefParam out = *src;
      out.sizes.clear();
      CONDENSATE_RETURN_IF_ERROR(sizes(out));
      auto offsets = sv.getMixedOffsets(), steps = sv.getMixedStrides();
      for (size_t i = 0; i < offsets.size(); ++i) {
        auto off = value(offsets[i]);
        auto step = value(steps[i]);
        if (!off.ok() || !step.ok())
          return Status::error("unsupported subview offsets or strides");
        if (!(off->isConstant() && off->value == 0))
          out.offset = Expr::binary(
              Expr::Kind::Add, out.offset,
              Expr::binary(Expr::Kind::Mul, *off, src->strides[i]));
        if (!(step->isConstant() && step->value == 1))
          out.strides[i] =
              Expr::binary(Expr::Kind::Mul, src->strides[i], *step);
      }
      return out;
    }
    return Status::error("a kernel argument comes from an unsupported op");
  }

  Result<KernelLaunch> launchOf(mlir::gpu::LaunchFuncOp launch) {
    KernelLaunch l;
    l.kernel = launch.getKernelName().str();
    Value grid[3] = {launch.getGridSizeX(), launch.getGridSizeY(),
                     launch.getGridSizeZ()};
    Value block[3] = {launch.getBlockSizeX(), launch.getBlockSizeY(),
                      launch.getBlockSizeZ()};
    for (int i = 0; i < 3; ++i) {
      auto g = expr(grid[i]);
      if (!g.ok())
        return g.status();
      l.grid[i] = *g;
      auto c = block[i].getDefiningOp<mlir::arith::ConstantIndexOp>();
      if (!c)
        return Status::error("kernel " + l.kernel +
                             " has a non-constant block size");
      l.block[i] = c.value();
    }
    if (Value shared = launch.getDynamicSharedMemorySize()) {
      auto c = shared.getDefiningOp<mlir::arith::ConstantIntOp>();
      if (!c || c.value() < 0)
        return Status::error("kernel " + l.kernel +
                             " has a non-constant dynamic shared memory size");
      l.sharedBytes = c.value();
    }
    l.gridDependency =
        launch->hasAttr(mlir::condensate::kGridDependencyAttrName);
    for (Value operand : launch.getKernelOperands()) {
      if (!mlir::isa<mlir::MemRefType>(operand.getType()))
        return Status::error("kernel " + l.kernel +
                             " takes a non-memref argument");
      auto p = memrefOf(operand);
      if (!p.ok())
        return p.status().withContext("kernel " + l.kernel);
      l.params.push_back(*p);
    }
    return l;
  }

  mlir::func::FuncOp fn;
  llvm::DenseMap<Value, int64_t> scratch;
};

} // namespace

FailureOr<LaunchPlan> mlir::condensate::extractLaunchPlan(ModuleOp module,
                                                         StringRef model,
                                                         StringRef target) {
  LaunchPlan plan;
  plan.target = target.str();
  auto tables = module->getAttrOfType<DictionaryAttr>(kLayerTablesAttrName);
  auto table = tables ? tables.getAs<DictionaryAttr>(model) : DictionaryAttr();
  if (!table)
    return module.emitError() << "no layer table for @" << model;
  auto layers = table.getAs<ArrayAttr>("layers");
  auto append = table.getAs<FlatSymbolRefAttr>("append");
  auto adaptive = table.getAs<DenseI64ArrayAttr>("adaptive");
  if (!layers || !append || !adaptive)
    return module.emitError() << "malformed layer table for @" << model;
  for (Attribute a : layers)
    plan.layers.push_back(cast<FlatSymbolRefAttr>(a).getValue().str());
  if (auto prefill = table.getAs<ArrayAttr>("prefill"))
    for (Attribute a : prefill)
      plan.prefill.push_back(cast<FlatSymbolRefAttr>(a).getValue().str());
  plan.append = append.getValue().str();
  for (int64_t l : adaptive.asArrayRef())
    plan.adaptive.push_back(l);
  for (auto fn : module.getOps<func::FuncOp>()) {
    FunctionPlanExtractor extractor(fn);
    auto extracted = extractor.run();
    if (!extracted.ok())
      return fn.emitError() << extracted.message();
    plan.functions[extracted->name] = *extracted;
  }
  for (const std::string &name : plan.layers)
    if (!plan.functions.count(name))
      return module.emitError() << "layer function @" << name
                                << " has no host function";
  for (const std::string &name : plan.prefill)
    if (!plan.functions.count(name))
      return module.emitError() << "prefill function @" << name
                                << " has no host function";
  if (!plan.functions.count(plan.append))
    return module.emitError() << "append function @" << plan.append
                              << " has no host function";
  return plan;
}

namespace {

std::string exprList(const std::vector<Expr> &es) {
  std::string out = "[";
  for (size_t i = 0; i < es.size(); ++i)
    out += (i ? ", " : "") + es[i].toString();
  return out + "]";
}

/// One line per function, launch and parameter: what lit checks.
void printPlan(llvm::raw_ostream &os, StringRef model, const LaunchPlan &plan) {
  os << "// launch plan of @" << model << " for " << plan.target << "\n";
  os << "layers:";
  for (const std::string &l : plan.layers)
    os << " @" << l;
  os << "\nprefill:";
  for (const std::string &l : plan.prefill)
    os << " @" << l;
  os << "\nappend: @" << plan.append << "\nadaptive:";
  for (int64_t l : plan.adaptive)
    os << " " << l;
  os << "\n";
  for (const auto &[name, fn] : plan.functions) {
    os << "func @" << name << " args " << fn.numArgs << "\n";
    for (size_t i = 0; i < fn.scratch.size(); ++i)
      os << "  scratch " << i << " " << fn.scratch[i].elementType << " "
         << exprList(fn.scratch[i].shape) << "\n";
    for (const KernelLaunch &l : fn.launches) {
      os << "  launch " << l.kernel << " grid (" << l.grid[0].toString() << ", "
         << l.grid[1].toString() << ", " << l.grid[2].toString() << ") block ("
         << l.block[0] << ", " << l.block[1] << ", " << l.block[2] << ")";
      if (l.sharedBytes > 0)
        os << " shared " << l.sharedBytes;
      if (l.gridDependency)
        os << " grid_dependency";
      os << "\n";
      for (const MemRefParam &p : l.params)
        os << "    "
           << (p.buffer.kind == BufferRef::Kind::Argument ? "arg " : "scratch ")
           << p.buffer.index << " " << p.elementType << " offset "
           << p.offset.toString() << " sizes " << exprList(p.sizes)
           << " strides " << exprList(p.strides) << "\n";
    }
  }
}

/// Prints the launch plan of every model in the module's layer tables, as
/// lines or as the manifest's JSON (for lit tests of the extraction).
struct TestLaunchPlanPass
    : public mlir::condensate::impl::CondensateTestLaunchPlanBase<
          TestLaunchPlanPass> {
  using CondensateTestLaunchPlanBase::CondensateTestLaunchPlanBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto tables = module->getAttrOfType<DictionaryAttr>(
        mlir::condensate::kLayerTablesAttrName);
    if (!tables) {
      module.emitError() << "no layer tables: run the GPU lowering first";
      return signalPassFailure();
    }
    for (NamedAttribute entry : tables) {
      StringRef model = entry.getName().getValue();
      auto plan = mlir::condensate::extractLaunchPlan(module, model, target);
      if (failed(plan))
        return signalPassFailure();
      if (json)
        llvm::outs() << plan->toJSON() << "\n";
      else
        printPlan(llvm::outs(), model, *plan);
    }
  }
};

} // namespace
