# Run with cmake -P at build time: writes the AOT library PREFIX.ptx and
# PREFIX.json from SPEC with condensate-translate (TRANSLATE). Without a
# CUDA libdevice to link (no CUDA toolkit on the machine) the compiler
# refuses the kernels; then PREFIX.skip records its message and the AOT
# tests skip, saying so. Any other failure fails the build.
# With CHIPS (e.g. sm_80,sm_90) it writes a fat library instead: one image
# per chip (PTX, manifest, header, and a cubin where ptxas is installed) and
# PREFIX.json indexing them.
file(REMOVE ${PREFIX}.skip)
if(CHIPS)
  set(emits all)
  set(chip_arg --chip=${CHIPS})
else()
  set(emits ptx manifest)
  set(chip_arg)
endif()
foreach(emit ${emits})
  execute_process(COMMAND ${TRANSLATE} ${SPEC} --emit=${emit} ${chip_arg}
                          -o ${PREFIX}
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
