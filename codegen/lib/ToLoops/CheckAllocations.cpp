//===- CheckAllocations.cpp - no write through a null scratch buffer ------===//
//
// The CPU stages allocate scratch buffers with memref.alloc, which becomes
// malloc. After each allocation in a function's body the function tests the
// pointer; when it is null (and the buffer is not empty) it frees the
// buffers it still holds, writes abi::kWorkspaceFailed to the first stats
// entry when it has the decode-attention signature, and returns. The runtime
// turns that entry into an error.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "condensate/ABI/AttentionABI.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::condensate;
namespace abi = ::condensate::abi;

namespace {

/// The stats argument of a decode-attention function, or null.
Value statsArgument(func::FuncOp fn) {
  if (fn.getNumArguments() != abi::kAttendArgs)
    return {};
  Value stats = fn.getArgument(abi::AttendStats);
  auto type = dyn_cast<MemRefType>(stats.getType());
  if (!type || type.getRank() != 3 || !type.getElementType().isF32() ||
      type.getDimSize(2) != abi::kStatsWidth)
    return {};
  return stats;
}

/// i1: the allocation is null although it holds at least one element.
Value allocationFailed(OpBuilder &b, memref::AllocOp alloc) {
  Location loc = alloc.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, alloc.getResult());
  Value failed = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       pointer, zero);
  for (Value size : alloc.getDynamicSizes())
    failed = arith::AndIOp::create(
        b, loc, failed,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, size, zero));
  return failed;
}

LogicalResult checkFunction(func::FuncOp fn) {
  if (fn.isExternal())
    return success();
  SmallVector<memref::AllocOp> allocs;
  WalkResult nested = fn.walk([&](memref::AllocOp alloc) {
    if (alloc->getParentOp() != fn.getOperation()) {
      alloc.emitOpError() << "scratch buffers of the CPU lowering must be "
                             "allocated in the function body";
      return WalkResult::interrupt();
    }
    allocs.push_back(alloc);
    return WalkResult::advance();
  });
  if (nested.wasInterrupted())
    return failure();
  if (allocs.empty())
    return success();
  if (fn.getNumResults() != 0)
    return fn.emitOpError()
           << "allocates scratch buffers but returns values: a failed "
              "allocation could not return";
  Value stats = statsArgument(fn);
  // The body's allocations and frees in order (the body is one block until
  // the first split below).
  SmallVector<Operation *> order;
  for (Operation &op : fn.getBody().front())
    if (isa<memref::AllocOp, memref::DeallocOp>(op))
      order.push_back(&op);
  // Buffers allocated and not yet freed at each allocation.
  llvm::SetVector<Value> live;
  for (Operation *op : order) {
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      live.remove(dealloc.getMemref());
      continue;
    }
    auto alloc = cast<memref::AllocOp>(op);
    Location loc = alloc.getLoc();
    Block *before = alloc->getBlock();
    OpBuilder b(alloc->getContext());
    b.setInsertionPointAfter(alloc);
    Value failed = allocationFailed(b, alloc);
    Block *after = before->splitBlock(b.getInsertionPoint());
    Block *fail = b.createBlock(after);
    for (Value held : live)
      memref::DeallocOp::create(b, loc, held);
    if (stats) {
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value batch = memref::DimOp::create(b, loc, stats, 0);
      Value heads = memref::DimOp::create(b, loc, stats, 1);
      Value any = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, batch, zero),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, heads, zero));
      scf::IfOp mark = scf::IfOp::create(b, loc, any, /*withElseRegion=*/false);
      OpBuilder inside = mark.getThenBodyBuilder();
      Value sentinel = arith::ConstantOp::create(
          inside, loc, inside.getF32FloatAttr(abi::kWorkspaceFailed));
      Value column = arith::ConstantIndexOp::create(inside, loc,
                                                    abi::StatFallback);
      memref::StoreOp::create(inside, loc, sentinel, stats,
                              ValueRange{zero, zero, column});
    }
    func::ReturnOp::create(b, loc);
    b.setInsertionPointToEnd(before);
    cf::CondBranchOp::create(b, loc, failed, fail, ValueRange{}, after,
                             ValueRange{});
    live.insert(alloc.getResult());
  }
  return success();
}

} // namespace

LogicalResult mlir::condensate::loops::checkAllocations(ModuleOp module) {
  for (auto fn : module.getOps<func::FuncOp>())
    if (failed(checkFunction(fn)))
      return failure();
  return success();
}
