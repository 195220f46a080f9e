# CTest test package_consumer (tests/CMakeLists.txt): installs the dcalign build BUILD_DIR to a
# temporary prefix, moves the prefix elsewhere (the package must be relocatable), checks that no
# installed CMake file names the build or source tree, configures and builds the consumer
# project tests/package with CMAKE_PREFIX_PATH set to the moved prefix only, and runs it. Any
# failing step stops the script with an error (a non-zero status); the last line printed on
# success is "package test passed".
#
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
#         -DPACKAGE_DIR=lib/cmake/dcalign -DWITH_LEARN=ON|OFF -P run_package_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER PACKAGE_DIR WITH_LEARN)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_package_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(step name)
  message(STATUS "package test: ${name}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "package test: ${name} failed (${rc})")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(staged ${WORK_DIR}/staged)
set(prefix ${WORK_DIR}/prefix)
step(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${staged})
file(RENAME ${staged} ${prefix})

file(GLOB_RECURSE package_files ${prefix}/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "package test: no CMake package files were installed under ${prefix}")
endif()
foreach(f IN LISTS package_files)
  file(READ ${f} text)
  foreach(tree ${BUILD_DIR} ${SOURCE_DIR} ${staged})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "package test: ${f} names ${tree}: the package is not relocatable")
    endif()
  endforeach()
endforeach()

step(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package -B ${WORK_DIR}/build
     -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
     -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DCONSUMER_WITH_LEARN=${WITH_LEARN})
# find_package must have taken the moved prefix, not another dcalign on this machine.
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt found_dir REGEX "^dcalign_DIR:")
if(NOT found_dir STREQUAL "dcalign_DIR:PATH=${prefix}/${PACKAGE_DIR}")
  message(FATAL_ERROR "package test: the consumer found ${found_dir}, not ${prefix}")
endif()
step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(run ${WORK_DIR}/build/consumer ${WORK_DIR})
message("${step_output}")
if(WITH_LEARN)
  step(run ${WORK_DIR}/build/consumer_learn)
  message("${step_output}")
  step(run ${WORK_DIR}/build/consumer_torch)
  message("${step_output}")
endif()
message("package test passed")
