//===- CondensateDialect.td - The condensate dialect -------*- tablegen -*-===//
//
// The dialect of sparse decode attention: a declared policy (anchor, local
// window, top-k by a selector) or a whole model's layer schedule, the
// high-level decode attention op, and the stages it decomposes into.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_DIALECT_TD
#define CONDENSATE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Condensate_Dialect : Dialect {
  let name = "condensate";
  let cppNamespace = "::mlir::condensate";
  let summary = "Sparse decode attention over a condensate set";
  let description = [{
    During decoding, query position i of one attention head attends to the
    cached keys and values of a paged KV cache. A *condensate set* keeps only
    an anchor (the first `anchor` positions), a local window of the last
    `window` positions, and the `topk` highest-scoring remaining positions
    (token top-k, or whole pages ranked by a page summary); softmax attention
    runs over that set alone. A certificate bounds the softmax mass the set
    leaves out, and a policy with tolerance `tau` adds pages or falls back to
    dense attention until the bound holds.

    The dialect holds:
    - attributes: `#condensate.policy`, `#condensate.dense`,
      `#condensate.rule`, `#condensate.schedule`, `#condensate.spec`;
    - `condensate.model`: a model's attention configuration and schedule
      (expanded into functions listed in the module attribute
      `condensate.layer_tables`);
    - `condensate.decode_attention`: one layer's decode attention;
    - `condensate.append_kv`: writes a token into the paged cache and keeps
      the per-page summaries up to date;
    - stages: `score_pages`, `score_tokens`, `select_topk`, `sparse_attend`,
      `dense_attend`, `certify`, `merge`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
  private:
    void registerAttributes();
  public:
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::func::FuncDialect"
  ];
}

#endif // CONDENSATE_DIALECT_TD
