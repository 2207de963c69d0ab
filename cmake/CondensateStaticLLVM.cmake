# Rewrites the link interfaces of Debian's imported MLIR static libraries so
# that they pull static LLVM components instead of the libLLVM/libMLIR dylibs.
# The result links into self-contained binaries and one shared runtime library.
llvm_map_components_to_libnames(CONDENSATE_STATIC_LLVM_LIBS
  Core Support Analysis Passes IPO TransformUtils Instrumentation Target
  TargetParser MC MCParser Object BitReader BitWriter IRReader AsmParser
  Linker OrcJIT OrcTargetProcess OrcShared JITLink ExecutionEngine
  RuntimeDyld PerfJITEvents FrontendOpenMP FrontendOffloading
  X86CodeGen X86AsmParser X86Desc X86Info
  NVPTXCodeGen NVPTXDesc NVPTXInfo)

foreach(_t ${MLIR_EXPORTED_TARGETS})
  if(NOT TARGET ${_t})
    continue()
  endif()
  get_target_property(_type ${_t} TYPE)
  if(NOT _type STREQUAL "STATIC_LIBRARY")
    continue()
  endif()
  get_target_property(_libs ${_t} INTERFACE_LINK_LIBRARIES)
  if(NOT _libs)
    continue()
  endif()
  list(TRANSFORM _libs REPLACE "^LLVM$" "${CONDENSATE_STATIC_LLVM_LIBS}")
  list(REMOVE_ITEM _libs MLIR)
  set_target_properties(${_t} PROPERTIES INTERFACE_LINK_LIBRARIES "${_libs}")
endforeach()
