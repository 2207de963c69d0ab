//===- condensate-opt.cpp - the condensate optimizer driver ---------------===//
//
// mlir-opt for condensate: parses condensate (and upstream) IR, runs passes
// and pipelines by flag, prints the result. Malformed input gets a located
// diagnostic and a non-zero exit; input nested deeper than
// limits::kMaxNesting is refused before MLIR's recursive parser sees it.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/InitCondensate.h"
#include "condensate/Support/Nesting.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::DialectRegistry registry;
  mlir::condensate::registerCondensateDialects(registry);
  mlir::condensate::registerCondensatePasses();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "condensate optimizer driver\n", registry);

  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(mlir::MlirOptMain(
        argc, argv, inputFilename, outputFilename, registry));

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << "condensate-opt: error: " << errorMessage << "\n";
    return 1;
  }
  condensate::Status depth =
      condensate::checkNesting(file->getBuffer().str(),
                               file->getBufferIdentifier().str(),
                               condensate::Syntax::MLIR);
  if (!depth.ok()) {
    llvm::errs() << depth.message() << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << "condensate-opt: error: " << errorMessage << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(file), registry, config)))
    return 1;
  output->keep();
  return 0;
}
