# cmake -P, at package build time: the fat AOT library (sm_80 and sm_90) of
# every spec in SPECS_DIR, written into OUT_DIR with condensate-translate
# (TRANSLATE). A spec that cannot be compiled here (no CUDA libdevice) is left
# out with a warning: the package then JIT-compiles that shape at first use.
file(GLOB specs ${SPECS_DIR}/*.json)
# Afresh: a library of a spec since renamed or removed must not be packed.
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR})
foreach(spec ${specs})
  get_filename_component(name ${spec} NAME_WLE)
  execute_process(COMMAND ${TRANSLATE} ${spec} --emit=all --chip=sm_80,sm_90
                          -o ${OUT_DIR}/${name}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    string(STRIP "${err}" err)
    message(WARNING "prebuilt library ${name} not built: ${err}")
    file(GLOB partial ${OUT_DIR}/${name}.*)
    if(partial)
      file(REMOVE ${partial})
    endif()
  else()
    file(GLOB headers ${OUT_DIR}/${name}.*.h)
    if(headers)
      file(REMOVE ${headers})
    endif()
  endif()
endforeach()
