//===- ExpandSchedule.cpp - model schedule to per-layer functions ---------===//
//
// Implements condensate-expand-schedule: one function per distinct layer
// configuration, one prefill function per distinct prefill window, one
// append function, and a layer table.
//
//===----------------------------------------------------------------------===//
#include "condensate/Passes/Passes.h"

#include "condensate/ABI/Limits.h"

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
namespace abi = ::condensate::abi;

namespace {

static_assert(::condensate::abi::kDynamic == ShapedType::kDynamic,
              "the ABI's dynamic dimension is MLIR's");

/// The memref types of the attention and append functions of one model, in
/// argument order, as AttentionABI.h defines them.
struct ModelTypes {
  SmallVector<Type> attend, append, prefill;

  explicit ModelTypes(ModelOp model) {
    MLIRContext *ctx = model.getContext();
    abi::ModelDims dims{static_cast<int64_t>(model.getNumQHeads()),
                        static_cast<int64_t>(model.getNumKvHeads()),
                        static_cast<int64_t>(model.getHeadDim()),
                        static_cast<int64_t>(model.getPageSize()),
                        model.getCacheSketchBits()};
    auto element = [&](abi::Element e) -> Type {
      switch (e) {
      case abi::Element::KV:
        return model.getKvType();
      case abi::Element::I32:
        return IntegerType::get(ctx, 32);
      case abi::Element::F32:
        break;
      }
      return Float32Type::get(ctx);
    };
    auto attendShapes = abi::attendShapes(dims, abi::CallDims());
    for (int i = 0; i < abi::kAttendArgs; ++i)
      attend.push_back(
          MemRefType::get(attendShapes[i], element(abi::attendElement(i))));
    auto prefillShapes = abi::prefillShapes(dims, abi::PrefillCallDims());
    for (int i = 0; i < abi::kPrefillArgs; ++i)
      prefill.push_back(
          MemRefType::get(prefillShapes[i], element(abi::prefillElement(i))));
    auto appendShapes = abi::appendShapes(dims, abi::CallDims());
    for (int i = 0; i < abi::kAppendArgs; ++i)
      append.push_back(
          MemRefType::get(appendShapes[i], element(abi::appendElement(i))));
  }
};

struct ExpandSchedulePass
    : public mlir::condensate::impl::CondensateExpandScheduleBase<ExpandSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModelOp> models(module.getOps<ModelOp>());
    if (static_cast<int64_t>(models.size()) >
        ::condensate::limits::kMaxModels) {
      models[::condensate::limits::kMaxModels].emitOpError()
          << "is model " << ::condensate::limits::kMaxModels + 1
          << " of this module; one module expands at most "
          << ::condensate::limits::kMaxModels << " models";
      return signalPassFailure();
    }
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
    SmallVector<Attribute> policies = schedule.resolve(hkv);
    for (int64_t l = 0; l < model.getNumLayers(); ++l) {
      SmallVector<Attribute> heads;
      bool isAdaptive = false;
      for (int64_t h = 0; h < hkv; ++h) {
        Attribute policy = policies[l * hkv + h];
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
      auto fnType = b.getFunctionType(t.attend, {});
      auto fn = func::FuncOp::create(b, loc, fnName, fnType);
      fn->setAttr("llvm.emit_c_interface", emitC);
      OpBuilder body = OpBuilder::atBlockBegin(fn.addEntryBlock());
      auto args = fn.getArguments();
      bool uniform = llvm::all_equal(heads);
      bool needsWindows = isAdaptive;
      auto op = DecodeAttentionOp::create(
          body, loc, args[abi::AttendQ], args[abi::AttendK],
          args[abi::AttendV], args[abi::AttendPageTable],
          args[abi::AttendLens],
          needsWindows ? args[abi::AttendWindows] : Value(),
          args[abi::AttendSummaries], args[abi::AttendOut],
          args[abi::AttendStats],
          heads.front(), uniform ? ArrayAttr() : key, scale,
          /*spec=*/SpecAttr());
      (void)op;
      func::ReturnOp::create(body, loc);
      auto ref = FlatSymbolRefAttr::get(ctx, fnName);
      configs.insert({key, ref});
      layerRefs.push_back(ref);
    }

    // One prefill function per distinct prefill window: a layer whose
    // key/value heads all follow one static window policy (anchor + window,
    // no selection, no certificate) prefills in that window; every other
    // layer densely.
    llvm::MapVector<std::pair<int64_t, int64_t>, FlatSymbolRefAttr> prefills;
    SmallVector<Attribute> prefillRefs;
    for (int64_t l = 0; l < model.getNumLayers(); ++l) {
      ArrayRef<Attribute> heads(policies);
      heads = heads.slice(l * hkv, hkv);
      auto p = dyn_cast<PolicyAttr>(heads.front());
      abi::PrefillWindow w = abi::prefillWindowOf(
          llvm::all_equal(heads), !p, p && p.needsScores(),
          p && p.isAdaptive(), p ? p.getWindow() : 0, p ? p.getAnchor() : 0);
      std::pair<int64_t, int64_t> window{w.window, w.anchor};
      auto it = prefills.find(window);
      if (it != prefills.end()) {
        prefillRefs.push_back(it->second);
        continue;
      }
      std::string fnName = (name + "_prefill").str();
      if (window.first > 0)
        fnName += ("_w" + Twine(window.first) + "_a" + Twine(window.second))
                      .str();
      if (symbols.lookup(fnName))
        return model.emitOpError()
               << "cannot expand: symbol @" << fnName << " already exists";
      auto fn = func::FuncOp::create(b, loc, fnName,
                                     b.getFunctionType(t.prefill, {}));
      fn->setAttr("llvm.emit_c_interface", emitC);
      OpBuilder body = OpBuilder::atBlockBegin(fn.addEntryBlock());
      auto a = fn.getArguments();
      PrefillAttentionOp::create(
          body, loc, a[abi::PrefillQ], a[abi::PrefillK], a[abi::PrefillV],
          a[abi::PrefillPageTable], a[abi::PrefillLens],
          a[abi::PrefillRowStarts], a[abi::PrefillOut], scale,
          b.getI64IntegerAttr(window.first),
          b.getI64IntegerAttr(window.second));
      func::ReturnOp::create(body, loc);
      auto ref = FlatSymbolRefAttr::get(ctx, fnName);
      prefills.insert({window, ref});
      prefillRefs.push_back(ref);
    }

    // The append function of the model's cache.
    std::string appendName = (name + "_append").str();
    if (symbols.lookup(appendName))
      return model.emitOpError()
             << "cannot expand: symbol @" << appendName << " already exists";
    auto appendType = b.getFunctionType(t.append, {});
    auto appendFn = func::FuncOp::create(b, loc, appendName, appendType);
    appendFn->setAttr("llvm.emit_c_interface", emitC);
    {
      OpBuilder body = OpBuilder::atBlockBegin(appendFn.addEntryBlock());
      auto a = appendFn.getArguments();
      AppendKVOp::create(body, loc, a[abi::AppendKNew], a[abi::AppendVNew],
                         a[abi::AppendK], a[abi::AppendV],
                         a[abi::AppendPageTable], a[abi::AppendPositions],
                         a[abi::AppendSummaries],
                         model.getCacheSketchBits());
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
    entry.append("prefill", b.getArrayAttr(prefillRefs));
    entry.append("adaptive", b.getDenseI64ArrayAttr(adaptive));
    tables.set(name, entry.getDictionary(ctx));
    parent->setAttr(kLayerTablesAttrName, tables.getDictionary(ctx));
    model.erase();
    return success();
  }
};

} // namespace
