# Configures, builds and runs examples/consumer against the build tree's
# exported package (ctest script: cmake -DSRC= -DBIN= -DPKG= -P this).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${BIN}
                        -DCondensate_DIR=${PKG} -DCMAKE_BUILD_TYPE=Release
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
