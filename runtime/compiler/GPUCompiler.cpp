//===- GPUCompiler.cpp - schedules to PTX and launch plans ----------------===//
//
// Runs condensate-to-ptx in-process and reads the result back: the PTX of
// the gpu.binary and the launch plan of the host functions
// (codegen's extractLaunchPlan).
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"

#include "Support.h"

#include "condensate/Codegen/LaunchPlan.h"
#include "condensate/Codegen/Passes.h"
#include "condensate/Passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

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

/// The PTX of the module's gpu.binary, checked for unresolved externs.
Result<std::string> ptxOf(mlir::ModuleOp module, const std::string &what) {
  std::string ptx;
  for (auto binary : module.getOps<mlir::gpu::BinaryOp>())
    for (mlir::Attribute a : binary.getObjects())
      if (auto object = mlir::dyn_cast<mlir::gpu::ObjectAttr>(a))
        ptx = object.getObject().getValue().str();
  if (ptx.empty())
    return Status::error(what + ": the pipeline produced no PTX");
  CONDENSATE_RETURN_IF_ERROR(checkPTXResolved(ptx, what));
  return ptx;
}

/// Runs condensate-to-ptx on the first model of `module` and reads back the
/// PTX and the launch plan.
Result<GPULibrary>
compileModule(mlir::MLIRContext *ctx, mlir::OwningOpRef<mlir::ModuleOp> module,
              const std::string &modelText, const std::string &bufferName,
              const std::string &chip, const GPUTuning &tuning,
              std::chrono::steady_clock::time_point start) {
  auto model = detail::firstModel(*module, bufferName);
  if (!model.ok())
    return model.status();
  std::string name = model->getSymName().str();
  CONDENSATE_RETURN_IF_ERROR(tuning.validate().withContext(bufferName));
  GPULibrary lib;
  lib.chip = chip;
  lib.tuning = tuning;
  lib.modelText = modelText;
  auto shape = detail::shapeFromModel(*model);
  if (!shape.ok())
    return shape.status().withContext(bufferName);
  auto schedule = detail::scheduleFromAttr(model->getSchedule());
  if (!schedule.ok())
    return schedule.status().withContext(bufferName);
  lib.shape = *shape;
  lib.schedule = *schedule;

  detail::DiagnosticCollector diags(ctx);
  // Stage 1: expand and specialise, to record each function's spec.
  mlir::PassManager front(ctx);
  front.addPass(mc::createCondensateExpandSchedule());
  mc::CondensateSpecializeOptions specialize;
  specialize.target = chip;
  specialize.splits = tuning.sparseSplits;
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
  mlir::PassManager back(ctx);
  mc::PTXPipelineOptions options;
  options.chip = chip;
  options.tensorCores = tuning.tensorCores;
  options.splits = tuning.sparseSplits;
  options.denseSplits = tuning.denseSplits;
  options.attendWarps = tuning.attendWarps;
  options.sketchOccupancy = tuning.sketchOccupancy;
  options.attendStages = tuning.attendStages;
  options.attendOccupancy = tuning.attendOccupancy;
  mc::buildCondensateToPTXPipeline(back, options);
  if (mlir::failed(back.run(*module)))
    return diags.error(bufferName + ": lowering to PTX for " + chip +
                       " failed");

  auto ptx = ptxOf(*module, bufferName);
  if (!ptx.ok())
    return ptx.status();
  lib.ptx = ptx.take();
  auto plan = mc::extractLaunchPlan(*module, name, chip);
  if (mlir::failed(plan))
    return diags.error(bufferName + ": no launch plan");
  lib.plan = *plan;
  lib.compileSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  return lib;
}

} // namespace

Result<GPULibrary> compileGPULibrary(const std::string &text,
                                     const std::string &bufferName,
                                     const std::string &chip,
                                     const GPUTuning &tuning) {
  auto start = std::chrono::steady_clock::now();
  auto ctx = detail::makeContext();
  auto module = detail::parseModule(ctx.get(), text, bufferName);
  if (!module.ok())
    return module.status();
  return compileModule(ctx.get(), module.take(), text, bufferName, chip, tuning,
                       start);
}

Result<GPULibrary> compileGPULibrary(const ModelShape &shape,
                                     const Schedule &schedule,
                                     const std::string &chip,
                                     const GPUTuning &tuning) {
  auto start = std::chrono::steady_clock::now();
  CONDENSATE_RETURN_IF_ERROR(shape.validate());
  CONDENSATE_RETURN_IF_ERROR(schedule.validate());
  auto ctx = detail::makeContext();
  auto module = detail::buildModelModule(ctx.get(), "model", shape, schedule);
  if (!module.ok())
    return module.status();
  return compileModule(ctx.get(), module.take(),
                       modelToMLIR("model", shape, schedule), "<model>", chip,
                       tuning, start);
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
  return ptxOf(*module, bufferName);
}

} // namespace condensate
