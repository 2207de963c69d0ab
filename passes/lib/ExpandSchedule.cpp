//===- ExpandSchedule.cpp - model schedule to per-layer functions ---------===//
//
// Implements condensate-expand-schedule: one function per distinct layer
// configuration, one append function, and a layer table.
//
//===----------------------------------------------------------------------===//
#include "condensate/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONDENSATEEXPANDSCHEDULE
#include "condensate/Passes/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

/// The memref types of the fixed attention and append ABI of one model.
struct ModelTypes {
  MemRefType q, kv, pageTable, vec, summaries, stats, newKV;

  explicit ModelTypes(ModelOp model) {
    MLIRContext *ctx = model.getContext();
    int64_t dyn = ShapedType::kDynamic;
    int64_t hq = model.getNumQHeads(), hkv = model.getNumKvHeads();
    int64_t d = model.getHeadDim(), p = model.getPageSize();
    auto f32 = Float32Type::get(ctx);
    auto i32 = IntegerType::get(ctx, 32);
    q = MemRefType::get({dyn, hq, d}, f32);
    kv = MemRefType::get({dyn, hkv, p, d}, model.getKvType());
    pageTable = MemRefType::get({dyn, dyn}, i32);
    vec = MemRefType::get({dyn}, i32);
    summaries = MemRefType::get({dyn, hkv, kSummarySlots, d}, f32);
    stats = MemRefType::get({dyn, hq, kStatsWidth}, f32);
    newKV = MemRefType::get({dyn, hkv, d}, f32);
  }
};

struct ExpandSchedulePass
    : public condensate::impl::CondensateExpandScheduleBase<ExpandSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModelOp> models(module.getOps<ModelOp>());
    for (ModelOp model : models)
      if (failed(expand(model)))
        return signalPassFailure();
  }

  LogicalResult expand(ModelOp model) {
    OpBuilder b(model);
    MLIRContext *ctx = model.getContext();
    Location loc = model.getLoc();
    ModelTypes t(model);
    StringRef name = model.getSymName();
    SymbolTable symbols(model->getParentOp());
    ScheduleAttr schedule = model.getSchedule();
    int64_t hkv = model.getNumKvHeads();
    auto scale = b.getF32FloatAttr(model.getScaleOrDefault());
    auto emitC = b.getUnitAttr();

    // One function per distinct tuple of per-head policies.
    llvm::MapVector<ArrayAttr, FlatSymbolRefAttr> configs;
    SmallVector<Attribute> layerRefs;
    SmallVector<int64_t> adaptive;
    for (int64_t l = 0; l < model.getNumLayers(); ++l) {
      SmallVector<Attribute> heads;
      bool isAdaptive = false;
      for (int64_t h = 0; h < hkv; ++h) {
        Attribute policy = schedule.getPolicy(l, h);
        heads.push_back(policy);
        if (auto p = dyn_cast<PolicyAttr>(policy))
          isAdaptive |= p.isAdaptive();
      }
      if (isAdaptive)
        adaptive.push_back(l);
      ArrayAttr key = b.getArrayAttr(heads);
      auto it = configs.find(key);
      if (it != configs.end()) {
        layerRefs.push_back(it->second);
        continue;
      }
      std::string fnName = (name + "_layer" + Twine(l)).str();
      if (symbols.lookup(fnName))
        return model.emitOpError()
               << "cannot expand: symbol @" << fnName << " already exists";
      auto fnType = b.getFunctionType({t.q, t.kv, t.kv, t.pageTable, t.vec,
                                       t.vec, t.summaries, t.q, t.stats},
                                      {});
      auto fn = func::FuncOp::create(b, loc, fnName, fnType);
      fn->setAttr("llvm.emit_c_interface", emitC);
      OpBuilder body = OpBuilder::atBlockBegin(fn.addEntryBlock());
      auto args = fn.getArguments();
      bool uniform = llvm::all_equal(heads);
      bool needsWindows = isAdaptive;
      auto op = DecodeAttentionOp::create(
          body, loc, args[0], args[1], args[2], args[3], args[4],
          needsWindows ? args[5] : Value(), args[6], args[7], args[8],
          heads.front(), uniform ? ArrayAttr() : key, scale,
          /*spec=*/SpecAttr());
      (void)op;
      func::ReturnOp::create(body, loc);
      auto ref = FlatSymbolRefAttr::get(ctx, fnName);
      configs.insert({key, ref});
      layerRefs.push_back(ref);
    }

    // The append function of the model's cache.
    std::string appendName = (name + "_append").str();
    if (symbols.lookup(appendName))
      return model.emitOpError()
             << "cannot expand: symbol @" << appendName << " already exists";
    auto appendType = b.getFunctionType(
        {t.newKV, t.newKV, t.kv, t.kv, t.pageTable, t.vec, t.summaries}, {});
    auto appendFn = func::FuncOp::create(b, loc, appendName, appendType);
    appendFn->setAttr("llvm.emit_c_interface", emitC);
    {
      OpBuilder body = OpBuilder::atBlockBegin(appendFn.addEntryBlock());
      auto a = appendFn.getArguments();
      AppendKVOp::create(body, loc, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
      func::ReturnOp::create(body, loc);
    }

    // Record the layer table on the module; it survives the lowering to LLVM.
    Operation *parent = model->getParentOp();
    NamedAttrList tables;
    if (auto existing =
            parent->getAttrOfType<DictionaryAttr>(kLayerTablesAttrName))
      tables.append(existing.getValue());
    NamedAttrList entry;
    entry.append("append", FlatSymbolRefAttr::get(ctx, appendName));
    entry.append("layers", b.getArrayAttr(layerRefs));
    entry.append("adaptive", b.getDenseI64ArrayAttr(adaptive));
    tables.set(name, entry.getDictionary(ctx));
    parent->setAttr(kLayerTablesAttrName, tables.getDictionary(ctx));
    model.erase();
    return success();
  }
};

} // namespace
