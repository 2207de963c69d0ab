//===- FuzzManifest.cpp - libFuzzer target: AOT library manifests ---------===//
//
// Any text is a candidate manifest of an AOT kernel library: reading it
// (with a PTX that defines the kernels it names) must fail cleanly or give
// a library whose plan only refers to arguments and scratch it has, and
// whose expressions evaluate without crashing.
//
//===----------------------------------------------------------------------===//
#include "condensate/Runtime/Attention.h"
#include "condensate/Runtime/GPUProgram.h"

#include <cstdint>
#include <string>

using namespace condensate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string manifest(reinterpret_cast<const char *>(data), size);
  // Every kernel name the manifest mentions gets an entry in the PTX.
  std::string ptx = ".version 8.0\n.target sm_90\n";
  for (size_t at = manifest.find("\"kernel\""); at != std::string::npos;
       at = manifest.find("\"kernel\"", at + 1)) {
    size_t q = manifest.find('"', manifest.find(':', at) + 1);
    size_t e = q == std::string::npos ? q : manifest.find('"', q + 1);
    if (e != std::string::npos && e - q < 256)
      ptx += ".visible .entry " + manifest.substr(q + 1, e - q - 1) + "(\n)\n";
  }
  auto lib = GPULibrary::fromManifest(manifest, ptx);
  if (!lib.ok())
    return 0;
  const ModelShape &s = lib->shape;
  auto shapes = abi::attendShapes(modelDims(s), {2, 3, 5});
  for (const auto &[name, fn] : lib->plan.functions)
    for (const KernelLaunch &l : fn.launches) {
      for (const Expr &g : l.grid)
        (void)g.eval(shapes);
      for (const MemRefParam &p : l.params) {
        (void)p.offset.eval(shapes);
        for (const Expr &e : p.sizes)
          (void)e.eval(shapes);
      }
    }
  (void)lib->manifestJSON();
  return 0;
}
