# SPDX-License-Identifier: Apache-2.0
# Warnings for coord's own targets (tests, examples, benchmarks): never put on
# coord::coord, so consumers keep their own flags.
function(coord_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  endif()
endfunction()
