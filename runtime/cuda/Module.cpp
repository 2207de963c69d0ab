//===- Module.cpp - Loaded modules, their kernels and globals -------------===//
//
// Implements Module (PTX JIT-compiled, or a cubin/fatbin image loaded, with
// the JIT's logs kept on one line) and Function (kernel attributes).
//
//===----------------------------------------------------------------------===//
#include "DriverSymbols.h"

#include <cstdint>

namespace condensate {
namespace cuda {

using namespace abi;
using detail::LoadedDriver;

namespace {

/// Turns a multi-line driver log into one line.
std::string oneLine(const char *text) {
  std::string out;
  for (const char *c = text; *c; ++c) {
    if (*c == '\n' || *c == '\r') {
      if (!out.empty() && out.back() != ' ')
        out += "; ";
    } else {
      out += *c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';'))
    out.pop_back();
  return out;
}

CUfunction_attribute toDriver(FunctionAttribute attribute) {
  switch (attribute) {
  case FunctionAttribute::MaxThreadsPerBlock:
    return CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
  case FunctionAttribute::StaticSharedBytes:
    return CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
  case FunctionAttribute::LocalBytes:
    return CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
  case FunctionAttribute::Registers:
    return CU_FUNC_ATTRIBUTE_NUM_REGS;
  case FunctionAttribute::PtxVersion:
    return CU_FUNC_ATTRIBUTE_PTX_VERSION;
  case FunctionAttribute::BinaryVersion:
    return CU_FUNC_ATTRIBUTE_BINARY_VERSION;
  case FunctionAttribute::MaxDynamicSharedBytes:
    return CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  }
  return CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
}

} // namespace

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

void detail::unloadModule(ModuleHandle raw) noexcept {
  if (const LoadedDriver *d = LoadedDriver::ifLoaded())
    (void)d->api().cuModuleUnload(raw);
}

Result<Module> Module::loadPtx(const std::string &ptx) {
  if (ptx.empty())
    return Status::error("Module::loadPtx: empty PTX");
  if (ptx.find('\0') != std::string::npos)
    return Status::error("Module::loadPtx: PTX text contains a NUL byte");
  return load(ptx.c_str(), "PTX");
}

Result<Module> Module::loadImage(const void *image, std::size_t bytes) {
  if (!image || bytes == 0)
    return Status::error("Module::loadImage: empty image");
  return load(image, "image");
}

Result<Module> Module::load(const void *image, const char *what) {
  Result<const LoadedDriver *> driver = LoadedDriver::get();
  if (!driver)
    return driver.status();
  const LoadedDriver &d = **driver;

  constexpr std::size_t kLogBytes = std::size_t{16} * 1024;
  // One spare NUL byte past what the JIT may write.
  std::vector<char> errorLog(kLogBytes + 1, '\0');
  std::vector<char> infoLog(kLogBytes + 1, '\0');
  CUjit_option options[] = {
      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {
      errorLog.data(),
      reinterpret_cast<void *>(static_cast<std::uintptr_t>(kLogBytes)),
      infoLog.data(),
      reinterpret_cast<void *>(static_cast<std::uintptr_t>(kLogBytes))};

  CUmodule raw = nullptr;
  CUresult r = d.api().cuModuleLoadDataEx(
      &raw, image, sizeof(options) / sizeof(options[0]), options, values);
  if (r != CUDA_SUCCESS) {
    std::string detail = std::string("loading ") + what;
    std::string log = oneLine(errorLog.data());
    if (!log.empty())
      detail += "; JIT log: " + log;
    return d.check(r, "cuModuleLoadDataEx", detail);
  }
  Module module;
  module.handle_.reset(raw);
  module.infoLog_ = oneLine(infoLog.data());
  return module;
}

Result<Function> Module::getFunction(const std::string &name) const {
  if (!valid())
    return Status::error("Module::getFunction: empty module");
  const LoadedDriver &d = LoadedDriver::loaded();
  CUfunction function = nullptr;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuModuleGetFunction(&function, raw(), name.c_str()),
              "cuModuleGetFunction", "kernel '" + name + "'"));
  return Function(function, name);
}

Result<DeviceGlobal> Module::getGlobal(const std::string &name) const {
  if (!valid())
    return Status::error("Module::getGlobal: empty module");
  const LoadedDriver &d = LoadedDriver::loaded();
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  CONDENSATE_RETURN_IF_ERROR(d.check(
      d.api().cuModuleGetGlobal_v2(&address, &bytes, raw(), name.c_str()),
      "cuModuleGetGlobal_v2", "global '" + name + "'"));
  DeviceGlobal global;
  global.address = address;
  global.bytes = bytes;
  return global;
}

//===----------------------------------------------------------------------===//
// Function
//===----------------------------------------------------------------------===//

Status Function::setMaxDynamicSharedMemory(int bytes) const {
  if (!function_)
    return Status::error("Function::setMaxDynamicSharedMemory: empty function");
  const LoadedDriver &d = LoadedDriver::loaded();
  return d.check(
      d.api().cuFuncSetAttribute(
          function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      "cuFuncSetAttribute",
      "kernel '" + name_ + "', max dynamic shared memory " +
          std::to_string(bytes) + " bytes");
}

Result<int> Function::attribute(FunctionAttribute attribute) const {
  if (!function_)
    return Status::error("Function::attribute: empty function");
  const LoadedDriver &d = LoadedDriver::loaded();
  CUfunction_attribute which = toDriver(attribute);
  int value = 0;
  CONDENSATE_RETURN_IF_ERROR(
      d.check(d.api().cuFuncGetAttribute(&value, which, function_),
              "cuFuncGetAttribute",
              "kernel '" + name_ + "', attribute " +
                  std::to_string(static_cast<int>(which))));
  return value;
}

} // namespace cuda
} // namespace condensate
