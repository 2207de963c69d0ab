//===- GPUCompiler.cpp - schedules to PTX and launch plans ----------------===//
//
// Runs condensate-to-ptx in-process and reads the result back: the PTX of
// the gpu.binary, and a launch plan extracted from the host functions (their
// scratch allocations, subviews and gpu.launch_func ops, with every index
// written as an expression over argument dimensions).
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/GPUProgram.h"

#include "CompilerSupport.h"

#include "condensate/Codegen/Passes.h"
#include "condensate/Passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

#include <nlohmann/json.hpp>

#include <chrono>

namespace mc = mlir::condensate;
using mlir::Value;

namespace condensate {

namespace {

/// Fails when the PTX still calls libdevice functions it does not define
/// (no libdevice was found to link): ptxas would reject it much later.
Status checkPTXResolved(const std::string &ptx, const std::string &what) {
  size_t at = ptx.find(".extern .func");
  while (at != std::string::npos) {
    size_t nv = ptx.find("__nv_", at);
    size_t eol = ptx.find('\n', at);
    if (nv != std::string::npos && nv < eol) {
      size_t end = ptx.find_first_of(" (;", nv);
      return Status::error(
          what + ": the PTX calls " + ptx.substr(nv, end - nv) +
          " from CUDA's libdevice, which was not found to link; set "
          "CUDA_HOME to a CUDA toolkit (with nvvm/libdevice/libdevice.10.bc)");
    }
    at = ptx.find(".extern .func", at + 1);
  }
  return Status::success();
}

/// Reads a host function after convert-condensate-to-gpu as a plan.
class PlanExtractor {
public:
  explicit PlanExtractor(mlir::func::FuncOp fn) : fn(fn) {}

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
    auto binary = [&](Expr::Kind k, Value a, Value b) -> Result<Expr> {
      auto x = expr(a);
      if (!x.ok())
        return x;
      auto y = expr(b);
      if (!y.ok())
        return y;
      if (x->isConstant() && y->isConstant()) {
        int64_t p = x->value, q = y->value;
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
      return Expr::binary(k, *x, *y);
    };
    mlir::Operation *op = v.getDefiningOp();
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::AddIOp>(op))
      return binary(Expr::Kind::Add, o.getLhs(), o.getRhs());
    if (auto o = mlir::dyn_cast_or_null<mlir::arith::MulIOp>(op))
      return binary(Expr::Kind::Mul, o.getLhs(), o.getRhs());
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
    if (launch.getDynamicSharedMemorySize())
      return Status::error("kernel " + l.kernel +
                           " uses dynamic shared memory");
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

Result<GPULibrary> compileGPULibrary(const std::string &text,
                                     const std::string &bufferName,
                                     const std::string &chip) {
  auto start = std::chrono::steady_clock::now();
  auto ctx = detail::makeContext();
  auto parsed = detail::parseModule(ctx.get(), text, bufferName);
  if (!parsed.ok())
    return parsed.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*parsed);
  auto models = module->getOps<mc::ModelOp>();
  if (models.empty())
    return Status::error(bufferName + ": no condensate.model op");
  mc::ModelOp model = *models.begin();
  std::string name = model.getSymName().str();
  GPULibrary lib;
  lib.chip = chip;
  lib.modelText = text;
  auto shape = detail::shapeFromModel(model);
  auto schedule = detail::scheduleFromAttr(model.getSchedule());
  if (!shape.ok() || !schedule.ok())
    return Status::error(bufferName + ": invalid model");
  lib.shape = *shape;
  lib.schedule = *schedule;

  detail::DiagnosticCollector diags(ctx.get());
  // Stage 1: expand and specialise, to record each function's spec.
  mlir::PassManager front(ctx.get());
  front.addPass(mc::createCondensateExpandSchedule());
  mc::CondensateSpecializeOptions specialize;
  specialize.target = chip;
  front.addPass(mc::createCondensateSpecialize(specialize));
  if (mlir::failed(front.run(*module)))
    return diags.error(bufferName + ": specialisation for " + chip +
                       " failed");
  module->walk([&](mc::DecodeAttentionOp op) {
    auto fn = op->getParentOfType<mlir::func::FuncOp>();
    std::string spec;
    llvm::raw_string_ostream os(spec);
    mlir::Attribute(op.getSpecAttr()).print(os);
    lib.specs[fn.getSymName().str()] = spec;
  });
  // Stage 2: the rest of condensate-to-ptx (expansion and specialisation
  // are no-ops on the already expanded module).
  mlir::PassManager back(ctx.get());
  mc::PTXPipelineOptions options;
  options.chip = chip;
  mc::buildCondensateToPTXPipeline(back, options);
  if (mlir::failed(back.run(*module)))
    return diags.error(bufferName + ": lowering to PTX for " + chip +
                       " failed");

  // The PTX.
  for (auto binary : module->getOps<mlir::gpu::BinaryOp>())
    for (mlir::Attribute a : binary.getObjects())
      if (auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(a))
        lib.ptx = object.getObject().getValue().str();
  if (lib.ptx.empty())
    return Status::error(bufferName + ": the pipeline produced no PTX");
  CONDENSATE_RETURN_IF_ERROR(checkPTXResolved(lib.ptx, bufferName));

  // The launch plan.
  lib.plan.target = chip;
  auto tables = (*module)->getAttrOfType<mlir::DictionaryAttr>(
      mc::kLayerTablesAttrName);
  auto table = tables ? tables.getAs<mlir::DictionaryAttr>(name)
                      : mlir::DictionaryAttr();
  if (!table)
    return Status::error(bufferName + ": no layer table for @" + name);
  for (mlir::Attribute a : table.getAs<mlir::ArrayAttr>("layers"))
    lib.plan.layers.push_back(
        mlir::cast<mlir::FlatSymbolRefAttr>(a).getValue().str());
  lib.plan.append =
      table.getAs<mlir::FlatSymbolRefAttr>("append").getValue().str();
  for (int64_t l : table.getAs<mlir::DenseI64ArrayAttr>("adaptive").asArrayRef())
    lib.plan.adaptive.push_back(l);
  for (auto fn : module->getOps<mlir::func::FuncOp>()) {
    PlanExtractor extractor(fn);
    auto plan = extractor.run();
    if (!plan.ok())
      return plan.status().withContext(bufferName);
    lib.plan.functions[plan->name] = *plan;
  }
  lib.compileSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  return lib;
}

std::string libdevicePath() { return mlir::condensate::findLibdevice(); }

Result<std::string> compileGPUModulesToPTX(const std::string &text,
                                           const std::string &bufferName,
                                           const std::string &chip) {
  auto ctx = detail::makeContext();
  auto parsed = detail::parseModule(ctx.get(), text, bufferName);
  if (!parsed.ok())
    return parsed.status();
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*parsed);
  detail::DiagnosticCollector diags(ctx.get());
  mlir::PassManager pm(ctx.get());
  mc::PTXPipelineOptions options;
  options.chip = chip;
  mc::buildGPUModulesToPTXPipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return diags.error(bufferName + ": lowering to PTX failed");
  std::string ptx;
  for (auto binary : module->getOps<mlir::gpu::BinaryOp>())
    for (mlir::Attribute a : binary.getObjects())
      if (auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(a))
        ptx = object.getObject().getValue().str();
  if (ptx.empty())
    return Status::error(bufferName + ": no gpu.module to lower");
  CONDENSATE_RETURN_IF_ERROR(checkPTXResolved(ptx, bufferName));
  return ptx;
}

std::string GPULibrary::manifestJSON() const {
  using nlohmann::json;
  json j = json::parse(plan.toJSON());
  j["model"] = {{"layers", shape.numLayers},   {"q_heads", shape.qHeads},
                {"kv_heads", shape.kvHeads},   {"head_dim", shape.headDim},
                {"page_size", shape.pageSize}, {"kv_type", kvTypeName(shape.kvType)},
                {"scale", shape.effectiveScale()}};
  j["schedule"] = schedule.toMLIR();
  j["model_mlir"] = modelText;
  j["specs"] = specs;
  // Per kernel: the parameter list an engine must pass, in order.
  json kernels = json::array();
  for (const auto &[fname, fn] : plan.functions)
    for (const KernelLaunch &l : fn.launches) {
      json params = json::array();
      for (const MemRefParam &p : l.params) {
        int64_t rank = static_cast<int64_t>(p.sizes.size());
        params.push_back({{"memref", p.elementType},
                          {"rank", rank},
                          {"expands_to", "ptr, ptr, i64 offset, " +
                                             std::to_string(rank) +
                                             " x i64 sizes, " +
                                             std::to_string(rank) +
                                             " x i64 strides"}});
      }
      kernels.push_back({{"name", l.kernel},
                         {"function", fname},
                         {"block", l.block},
                         {"shared_bytes", l.sharedBytes},
                         {"params", params}});
    }
  j["kernels"] = kernels;
  return j.dump(1);
}

Result<GPULibrary> GPULibrary::fromManifest(const std::string &manifest,
                                            std::string ptx) {
  using nlohmann::json;
  auto plan = LaunchPlan::fromJSON(manifest);
  if (!plan.ok())
    return plan.status();
  json j = json::parse(manifest, nullptr, false);
  GPULibrary lib;
  lib.plan = *plan;
  lib.chip = plan->target;
  lib.ptx = std::move(ptx);
  try {
    const json &m = j.at("model");
    lib.shape.numLayers = m.at("layers").get<int64_t>();
    lib.shape.qHeads = m.at("q_heads").get<int64_t>();
    lib.shape.kvHeads = m.at("kv_heads").get<int64_t>();
    lib.shape.headDim = m.at("head_dim").get<int64_t>();
    lib.shape.pageSize = m.at("page_size").get<int64_t>();
    std::string t = m.at("kv_type").get<std::string>();
    lib.shape.kvType = t == "f16"    ? KVType::F16
                       : t == "bf16" ? KVType::BF16
                                     : KVType::F32;
    lib.shape.scale = m.at("scale").get<float>();
    lib.modelText = j.value("model_mlir", std::string());
    lib.specs = j.value("specs", std::map<std::string, std::string>());
  } catch (const json::exception &e) {
    return Status::error(std::string("manifest: ") + e.what());
  }
  auto schedule = parseSchedule(j.value("schedule", std::string()),
                                lib.shape.numLayers, "manifest schedule");
  if (!schedule.ok())
    return schedule.status();
  lib.schedule = *schedule;
  if (lib.ptx.find(".entry") == std::string::npos)
    return Status::error("PTX has no kernel entry points");
  return lib;
}

} // namespace condensate
