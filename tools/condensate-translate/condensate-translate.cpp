//===- condensate-translate.cpp - condensate IR to kernel libraries -------===//
//
// Translates a condensate model (MLIR `condensate.model` op, or a JSON spec
// of shape and policy/schedule) into an AOT kernel library: PTX, cubin (via
// ptxas when installed), a JSON manifest of every kernel and launch, and a C
// header embedding both for engines that want a single include.
//
//===----------------------------------------------------------------------===//
#include "condensate/Compiler/Compiler.h"
#include "condensate/Runtime/Files.h"
#include "condensate/Runtime/GPUProgram.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <sys/stat.h>

using namespace condensate;

namespace {

const char *kUsage =
    "usage: condensate-translate INPUT [--emit=ptx|cubin|manifest|header|all]\n"
    "                            [--chip=sm_90|sm_80] [-o PREFIX]\n"
    "  INPUT  a .mlir file holding a condensate.model op, or a .json spec\n"
    "         {\"model\": {\"layers\", \"q_heads\", \"kv_heads\", \"head_dim\",\n"
    "         \"page_size\", \"kv_type\"}, \"schedule\": <policy or schedule>}\n"
    "  -o     output prefix (default: the input name without extension);\n"
    "         with --emit=ptx|manifest, '-o -' writes to stdout\n";

int error(const std::string &message) {
  std::cerr << "condensate-translate: error: " << message << "\n";
  return 1;
}

Status writeFile(const std::string &path, const std::string &data) {
  if (path == "-") {
    std::cout << data;
    return Status::success();
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << data))
    return Status::error("cannot write " + path);
  return Status::success();
}

/// A C string literal of `data`, split into lines.
std::string cLiteral(const std::string &data) {
  std::string out = "  \"";
  for (unsigned char c : data) {
    switch (c) {
    case '\n':
      out += "\\n\"\n  \"";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 32 || c >= 127) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\%03o", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

std::string findPtxas() {
  if (const char *p = std::getenv("PTXAS"))
    return p;
  for (const char *dir : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    struct stat st;
    if (::stat(dir, &st) == 0)
      return dir;
  }
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::string input, emit = "all", chip = "sm_90", prefix;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a.rfind("--emit=", 0) == 0)
      emit = a.substr(7);
    else if (a.rfind("--chip=", 0) == 0)
      chip = a.substr(7);
    else if (a == "-o" && i + 1 < argc)
      prefix = argv[++i];
    else if (!a.empty() && a[0] == '-' && a != "-")
      return error("unknown option '" + a + "'\n" + kUsage);
    else if (input.empty())
      input = a;
    else
      return error("more than one input ('" + input + "', '" + a + "')");
  }
  if (input.empty())
    return error(std::string("no input\n") + kUsage);
  if (emit != "ptx" && emit != "cubin" && emit != "manifest" &&
      emit != "header" && emit != "all")
    return error("--emit must be ptx, cubin, manifest, header or all");
  if (chip != "sm_90" && chip != "sm_80")
    return error("--chip must be sm_90 or sm_80, got '" + chip + "'");
  auto text = readFile(input);
  if (!text.ok())
    return error(text.message());
  if (prefix.empty()) {
    prefix = input;
    size_t dot = prefix.rfind('.');
    if (dot != std::string::npos && prefix.find('/', dot) == std::string::npos)
      prefix = prefix.substr(0, dot);
  }
  bool isJSON = input.size() > 5 && input.substr(input.size() - 5) == ".json";
  Result<GPULibrary> lib = Status::error("no input");
  if (isJSON) {
    auto spec = parseModelSpecJSON(*text, input);
    if (!spec.ok())
      return error(spec.message());
    lib = compileGPULibrary(spec->shape, spec->schedule, chip);
  } else {
    lib = compileGPULibrary(*text, input, chip);
  }
  if (!lib.ok())
    return error(lib.message());

  auto write = [&](const std::string &suffix, const std::string &data) {
    std::string path = prefix == "-" ? "-" : prefix + suffix;
    Status st = writeFile(path, data);
    if (!st.ok())
      return error(st.message());
    if (path != "-")
      std::cerr << "wrote " << path << "\n";
    return 0;
  };
  if (prefix == "-" && emit != "ptx" && emit != "manifest")
    return error("'-o -' needs --emit=ptx or --emit=manifest");
  if (emit == "ptx" || emit == "all" || emit == "cubin")
    if (write(".ptx", lib->ptx))
      return 1;
  if (emit == "manifest" || emit == "all")
    if (write(".json", lib->manifestJSON()))
      return 1;
  if (emit == "header" || emit == "all") {
    std::ostringstream h;
    std::string guard = "CONDENSATE_KERNELS_H";
    h << "/* Generated by condensate-translate from " << input
      << ": PTX for " << chip << " and the launch manifest. */\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n"
      << "#define CONDENSATE_HEAD_DIM " << lib->shape.headDim << "\n"
      << "#define CONDENSATE_Q_HEADS " << lib->shape.qHeads << "\n"
      << "#define CONDENSATE_KV_HEADS " << lib->shape.kvHeads << "\n"
      << "#define CONDENSATE_PAGE_SIZE " << lib->shape.pageSize << "\n"
      << "#define CONDENSATE_LAYERS " << lib->shape.numLayers << "\n"
      << "#define CONDENSATE_KV_TYPE \"" << kvTypeName(lib->shape.kvType)
      << "\"\n#define CONDENSATE_TARGET \"" << chip << "\"\n\n"
      << "static const char condensate_ptx[] =\n"
      << cLiteral(lib->ptx) << ";\n\n"
      << "static const char condensate_manifest_json[] =\n"
      << cLiteral(lib->manifestJSON()) << ";\n\n#endif\n";
    if (write(".h", h.str()))
      return 1;
  }
  if (emit == "cubin" || emit == "all") {
    std::string ptxas = findPtxas();
    if (ptxas.empty()) {
      if (emit == "cubin")
        return error("ptxas not found (set PTXAS or install the CUDA "
                     "toolkit); the PTX was written to " + prefix + ".ptx");
      std::cerr << "note: ptxas not found, no cubin written\n";
    } else {
      std::string cmd = "'" + ptxas + "' -arch=" + chip + " -O3 '" + prefix +
                        ".ptx' -o '" + prefix + ".cubin'";
      if (std::system(cmd.c_str()) != 0)
        return error("ptxas failed: " + cmd);
      std::cerr << "wrote " << prefix << ".cubin\n";
    }
  }
  std::cerr << "compiled " << lib->plan.functions.size() << " functions, "
            << lib->compileSeconds << " s\n";
  return 0;
}
