# SPDX-License-Identifier: Apache-2.0
# Runs PROGRAM and checks that its output starts with the lines of EXPECTED,
# in order, exactly (other lines may follow).
execute_process(COMMAND "${PROGRAM}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}:\n${out}")
endif()
file(READ "${EXPECTED}" expected)
string(LENGTH "${expected}" n)
string(SUBSTRING "${out}" 0 ${n} head)
if(NOT head STREQUAL expected)
  message(FATAL_ERROR "output differs.\n--- expected (first lines):\n${expected}--- got:\n${out}")
endif()
message(STATUS "output as expected:\n${out}")
