//===- Support.cpp - MLIR plumbing of the compiler library ----------------===//
//
// Context setup, diagnostic capture, attribute conversions both ways, and
// reading policies and models from MLIR text.
//
//===----------------------------------------------------------------------===//
#include "Support.h"

#include "condensate/Codegen/InitCondensate.h"
#include "condensate/Compiler/Compiler.h"
#include "condensate/Support/Nesting.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <sstream>

using namespace mlir;
namespace mc = mlir::condensate;

namespace condensate::detail {

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  mc::registerCondensateDialects(registry);
  auto ctx = std::make_unique<MLIRContext>(registry,
                                           MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

DiagnosticCollector::DiagnosticCollector(MLIRContext *ctx, std::string rename,
                                         std::string as)
    : ctx(ctx), rename(std::move(rename)), as(std::move(as)) {
  id = ctx->getDiagEngine().registerHandler([this](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string line;
    llvm::raw_string_ostream os(line);
    if (auto loc = dyn_cast<FileLineColLoc>(diag.getLocation())) {
      StringRef file = loc.getFilename().getValue();
      if (!this->rename.empty() && file == this->rename)
        file = this->as;
      os << file << ":" << loc.getLine() << ":" << loc.getColumn() << ": ";
    }
    os << "error: " << diag.str();
    // One line: fold any embedded newlines.
    for (char &c : line)
      if (c == '\n')
        c = ' ';
    messages.push_back(line);
    return success();
  });
}

DiagnosticCollector::~DiagnosticCollector() {
  ctx->getDiagEngine().eraseHandler(id);
}

Status DiagnosticCollector::error(const std::string &fallback) const {
  if (messages.empty())
    return Status::error(fallback);
  return Status::error(messages.front());
}

namespace {
// The runtime's selectors and the dialect's, case by case.
::condensate::Selector selectorFromAttr(mc::Selector s) {
  switch (s) {
  case mc::Selector::exact:
    return ::condensate::Selector::Exact;
  case mc::Selector::block_minmax:
    return ::condensate::Selector::BlockMinMax;
  case mc::Selector::block_mean:
    return ::condensate::Selector::BlockMean;
  case mc::Selector::sketch:
    return ::condensate::Selector::Sketch;
  }
  return ::condensate::Selector::BlockMinMax;
}
mc::Selector selectorToAttr(::condensate::Selector s) {
  switch (s) {
  case ::condensate::Selector::Exact:
    return mc::Selector::exact;
  case ::condensate::Selector::BlockMinMax:
    return mc::Selector::block_minmax;
  case ::condensate::Selector::BlockMean:
    return mc::Selector::block_mean;
  case ::condensate::Selector::Sketch:
    return mc::Selector::sketch;
  }
  return mc::Selector::block_minmax;
}
} // namespace

Result<Policy> policyFromAttr(Attribute attr) {
  if (isa<mc::DenseAttr>(attr))
    return Policy::makeDense();
  auto p = dyn_cast<mc::PolicyAttr>(attr);
  if (!p)
    return Status::error("expected #condensate.policy or #condensate.dense");
  Policy out;
  out.anchor = p.getAnchor();
  out.window = p.getWindow();
  out.windowMax = p.getWindowMax();
  out.topk = p.getTopk();
  out.selector = selectorFromAttr(p.getSelector());
  out.pageSize = p.getPageSize();
  out.tau = p.getTauValue();
  out.maxExtra = p.getMaxExtra();
  out.sketchBits = p.getSketchBits();
  out.outputBound = p.getOutputBound();
  return out;
}

Result<Schedule> scheduleFromAttr(mc::ScheduleAttr attr) {
  Schedule s;
  s.numLayers = attr.getNumLayers();
  s.relativeDepth = attr.getRelativeDepth();
  auto def = policyFromAttr(attr.getDefaultPolicy());
  if (!def.ok())
    return def.status();
  s.defaultPolicy = *def;
  for (mc::RuleAttr rule : attr.getRules()) {
    ScheduleRule r;
    r.layers.assign(rule.getLayers().begin(), rule.getLayers().end());
    r.kvHeads.assign(rule.getKvHeads().begin(), rule.getKvHeads().end());
    auto p = policyFromAttr(rule.getPolicy());
    if (!p.ok())
      return p.status();
    r.policy = *p;
    s.rules.push_back(r);
  }
  return s;
}

Result<ModelShape> shapeFromModel(mc::ModelOp model) {
  ModelShape shape;
  shape.numLayers = model.getNumLayers();
  shape.qHeads = model.getNumQHeads();
  shape.kvHeads = model.getNumKvHeads();
  shape.headDim = model.getHeadDim();
  shape.pageSize = model.getPageSize();
  Type t = model.getKvType();
  if (t.isF16())
    shape.kvType = KVType::F16;
  else if (t.isBF16())
    shape.kvType = KVType::BF16;
  else if (t.isF32())
    shape.kvType = KVType::F32;
  else
    return Status::error("@" + model.getSymName().str() +
                         ": kv_type must be f32, f16 or bf16");
  shape.scale = model.getScaleOrDefault();
  shape.sketchBits = model.getCacheSketchBits();
  return shape;
}

Result<Attribute> policyToAttr(MLIRContext *ctx, const Policy &p) {
  if (p.dense)
    return Attribute(mc::DenseAttr::get(ctx));
  DiagnosticCollector diags(ctx);
  auto attr = mc::PolicyAttr::getChecked(
      [&] { return emitError(UnknownLoc::get(ctx)); }, ctx, p.anchor, p.window,
      p.windowMax, p.topk, selectorToAttr(p.selector), p.pageSize,
      llvm::APFloat(p.tau), p.maxExtra, p.sketchBits, p.outputBound);
  if (!attr)
    return diags.error("invalid policy " + p.toMLIR());
  return Attribute(attr);
}

Result<mc::ScheduleAttr> scheduleToAttr(MLIRContext *ctx,
                                        const Schedule &s) {
  auto def = policyToAttr(ctx, s.defaultPolicy);
  if (!def.ok())
    return def.status();
  SmallVector<mc::RuleAttr> rules;
  DiagnosticCollector diags(ctx);
  for (const ScheduleRule &r : s.rules) {
    auto policy = policyToAttr(ctx, r.policy);
    if (!policy.ok())
      return policy.status();
    auto rule = mc::RuleAttr::getChecked(
        [&] { return emitError(UnknownLoc::get(ctx)); }, ctx,
        llvm::ArrayRef<int64_t>(r.layers), llvm::ArrayRef<int64_t>(r.kvHeads),
        *policy);
    if (!rule)
      return diags.error("invalid schedule rule");
    rules.push_back(rule);
  }
  auto attr = mc::ScheduleAttr::getChecked(
      [&] { return emitError(UnknownLoc::get(ctx)); }, ctx, s.numLayers, *def,
      llvm::ArrayRef<mc::RuleAttr>(rules), s.relativeDepth);
  if (!attr)
    return diags.error("invalid schedule");
  return attr;
}

Result<OwningOpRef<ModuleOp>> buildModelModule(MLIRContext *ctx,
                                               const std::string &name,
                                               const ModelShape &shape,
                                               const Schedule &schedule) {
  auto scheduleAttr = scheduleToAttr(ctx, schedule);
  if (!scheduleAttr.ok())
    return scheduleAttr.status();
  Location loc = UnknownLoc::get(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b = OpBuilder::atBlockEnd(module->getBody());
  Type kvType = shape.kvType == KVType::F16    ? Type(b.getF16Type())
                : shape.kvType == KVType::BF16 ? Type(b.getBF16Type())
                                               : Type(b.getF32Type());
  mc::ModelOp::create(b, loc, name, shape.numLayers, shape.qHeads,
                      shape.kvHeads, shape.headDim, shape.pageSize, kvType,
                      b.getF32FloatAttr(shape.effectiveScale()),
                      shape.sketchBits != 0
                          ? b.getI64IntegerAttr(shape.sketchBits)
                          : IntegerAttr(),
                      *scheduleAttr);
  DiagnosticCollector diags(ctx);
  if (failed(verify(*module)))
    return diags.error("invalid model @" + name);
  return module;
}

Result<mc::ModelOp> firstModel(ModuleOp module, const std::string &bufferName) {
  auto models = module.getOps<mc::ModelOp>();
  if (models.empty())
    return Status::error(bufferName + ": no condensate.model op");
  return *models.begin();
}

Result<OwningOpRef<ModuleOp>> parseModule(MLIRContext *ctx,
                                          const std::string &text,
                                          const std::string &bufferName) {
  // MLIR's parser recurses per nesting level.
  CONDENSATE_RETURN_IF_ERROR(checkNesting(text, bufferName, Syntax::MLIR));
  DiagnosticCollector diags(ctx);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, bufferName), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, ctx);
  if (!module)
    return diags.error(bufferName + ": could not parse");
  return module;
}

} // namespace condensate::detail

namespace condensate {

Result<std::pair<ModelShape, Schedule>>
parseModel(const std::string &text, const std::string &bufferName) {
  auto ctx = detail::makeContext();
  auto module = detail::parseModule(ctx.get(), text, bufferName);
  if (!module.ok())
    return module.status();
  auto model = detail::firstModel(**module, bufferName);
  if (!model.ok())
    return model.status();
  auto shape = detail::shapeFromModel(*model);
  auto schedule = detail::scheduleFromAttr(model->getSchedule());
  if (!shape.ok())
    return shape.status();
  if (!schedule.ok())
    return schedule.status();
  return std::make_pair(*shape, *schedule);
}

Result<Schedule> parseSchedule(const std::string &text, int64_t numLayers,
                               const std::string &bufferName) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return Status::error(bufferName + ": empty schedule");
  if (text[first] == '{' || text[first] == '"') {
    auto s = parseScheduleJSON(text, numLayers);
    if (!s.ok())
      return s.status().withContext(bufferName);
    return s;
  }
  // A schedule of one policy for every layer, or one of `depth =
  // relative`, applies at any depth; one whose rules name layers is for its
  // own depth only.
  auto checkLayers = [&](Schedule s) -> Result<Schedule> {
    auto r = s.atDepth(numLayers);
    if (!r.ok())
      return r.status().withContext(bufferName);
    return r;
  };
  if (text.find("condensate.model") != std::string::npos) {
    auto model = parseModel(text, bufferName);
    if (!model.ok())
      return model.status();
    return checkLayers(model->second);
  }
  CONDENSATE_RETURN_IF_ERROR(checkNesting(text, bufferName, Syntax::MLIR));
  auto ctx = detail::makeContext();
  Attribute scheduleAttr;
  {
    // Comments and blank lines around an attribute are allowed.
    std::string body;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      size_t c = line.find("//");
      body += (c == std::string::npos ? line : line.substr(0, c)) + " ";
    }
    detail::DiagnosticCollector diags(ctx.get(), body, bufferName);
    size_t consumed = 0;
    scheduleAttr = mlir::parseAttribute(body, ctx.get(), Type(), &consumed);
    if (!scheduleAttr)
      return diags.error(bufferName + ": could not parse the attribute");
    if (body.find_first_not_of(" \t\r\n", consumed) != std::string::npos)
      return Status::error(bufferName +
                           ": unexpected text after the attribute");
  }
  if (auto s = dyn_cast<mc::ScheduleAttr>(scheduleAttr)) {
    auto result = detail::scheduleFromAttr(s);
    if (!result.ok())
      return result.status().withContext(bufferName);
    return checkLayers(result.take());
  }
  auto policy = detail::policyFromAttr(scheduleAttr);
  if (!policy.ok())
    return policy.status().withContext(bufferName);
  return Schedule::uniform(numLayers, *policy);
}

} // namespace condensate
