//===- condensate-opt.cpp - the condensate optimizer driver ---------------===//
//
// mlir-opt for condensate: parses condensate (and upstream) IR, runs passes
// and pipelines by flag, prints the result. Malformed input gets a located
// diagnostic and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/InitCondensate.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::condensate::registerCondensateDialects(registry);
  mlir::condensate::registerCondensatePasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "condensate optimizer driver\n", registry));
}
