# Configures, builds and runs examples/consumer against the build tree's
# exported package (ctest script: cmake -DSRC= -DBIN= -DPKG= [-DCXX_FLAGS=]
# -P this; CXX_FLAGS carries the sanitizer flags of a sanitizer build).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN}
                        -DCondensate_DIR=${PKG} -DCMAKE_BUILD_TYPE=Release
                        "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND ${BIN}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer failed")
endif()
