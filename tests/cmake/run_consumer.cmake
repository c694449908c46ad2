# SPDX-License-Identifier: Apache-2.0
# Configures, builds and runs one consumer project from scratch.
file(REMOVE_RECURSE "${BIN}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
# Unoptimized, without debug information: the test is whether the package
# is found, compiles and links, not the programs' speed (at -O3 the three
# consumer builds were three minutes of CI).
run("${CMAKE_COMMAND}" -S "${SRC}" -B "${BIN}" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0" "-DCMAKE_CXX_COMPILER=${COMPILER}"
    "-DCMAKE_PREFIX_PATH=${PREFIX}" "-DCOORD_SOURCE_DIR=${COORD_SOURCE_DIR}")
run("${CMAKE_COMMAND}" --build "${BIN}")
# find_package: a program per component; the build-tree ways: all in one.
if(EXISTS "${BIN}/all_consumers")
  run("${BIN}/all_consumers")
else()
  foreach(program consumer jwt_consumer session_consumer postgres_consumer sqlite_consumer redis_consumer etcd_consumer
                  zookeeper_consumer)
    run("${BIN}/${program}")
  endforeach()
endif()
