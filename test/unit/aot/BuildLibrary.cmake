# Run with cmake -P at build time: writes the AOT library PREFIX.ptx and
# PREFIX.json from SPEC with condensate-translate (TRANSLATE). Without a
# CUDA libdevice to link (no CUDA toolkit on the machine) the compiler
# refuses the kernels; then PREFIX.skip records its message and the AOT
# tests skip, saying so. Any other failure fails the build.
file(REMOVE ${PREFIX}.skip)
foreach(emit ptx manifest)
  execute_process(COMMAND ${TRANSLATE} ${SPEC} --emit=${emit} -o ${PREFIX}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    if(err MATCHES "libdevice")
      string(STRIP "${err}" err)
      file(WRITE ${PREFIX}.skip "${err}")
      file(WRITE ${PREFIX}.ptx "")
      file(WRITE ${PREFIX}.json "")
      message(STATUS "AOT test library not built: ${err}")
      return()
    endif()
    message(FATAL_ERROR "condensate-translate failed: ${err}")
  endif()
endforeach()
