# The installed-package test (cmake -P). Installs the current build into a fresh prefix under the build
# directory, then
#   1. configures, builds and runs examples/consumer against it with find_package (CMAKE_PREFIX_PATH),
#   2. the same project through add_subdirectory of the source tree,
#   3. compiles tests/install/pkgconfig_main.cpp with `pkg-config --cflags --libs chainlet` and runs it,
# checking each program's output. Any failing step fails the test.
# Variables: SOURCE_DIR, BUILD_DIR, GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CONFIG (may be empty),
# SANITIZE (CHAINLET_SANITIZE of the build, may be empty: the consumers are then built with the same
# -fsanitize flags, since an instrumented libchainlet.a needs the sanitizer runtime at link time).
cmake_minimum_required(VERSION 3.25)
foreach(v SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_test.cmake: -D${v}=... is required")
  endif()
endforeach()

set(work "${BUILD_DIR}/install-test")
set(prefix "${work}/prefix")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")

# Runs a command; stops the test with its output if it fails. The output is left in `out`.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n  ${ARGN}\n${o}\n${e}")
  endif()
  message(STATUS "${what}: ok")
  set(out "${o}" PARENT_SCOPE)
endfunction()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
run("install into ${prefix}" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" ${config_args})
foreach(f include/chainlet/chainlet.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
file(GLOB_RECURSE installed_config "${prefix}/*/chainletConfig.cmake")
file(GLOB_RECURSE installed_version "${prefix}/*/chainletConfigVersion.cmake")
file(GLOB_RECURSE installed_pc "${prefix}/*/chainlet.pc")
file(GLOB_RECURSE installed_lib "${prefix}/*/libchainlet.*")
foreach(v installed_config installed_version installed_pc installed_lib)
  if(NOT ${v})
    message(FATAL_ERROR "the install in ${prefix} lacks ${v}")
  endif()
endforeach()

set(gen_args -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
if(MAKE_PROGRAM)
  list(APPEND gen_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CONFIG)
  list(APPEND gen_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
set(sanitize_flags)
if(SANITIZE)
  set(sanitize_flags "-fsanitize=${SANITIZE}")
  list(APPEND gen_args "-DCMAKE_CXX_FLAGS=${sanitize_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${sanitize_flags}")
endif()

# Checks the consumer's line: params=65 and final_loss < initial_loss.
function(check_consumer_output text label)
  if(NOT text MATCHES "params=65 initial_loss=([^ ]+) final_loss=([^ ]+) ")
    message(FATAL_ERROR "${label}: unexpected output:\n${text}")
  endif()
  if(NOT CMAKE_MATCH_2 LESS CMAKE_MATCH_1)
    message(FATAL_ERROR "${label}: the loss did not decrease (${CMAKE_MATCH_1} -> ${CMAKE_MATCH_2})")
  endif()
  message(STATUS "${label}: initial_loss=${CMAKE_MATCH_1} final_loss=${CMAKE_MATCH_2}")
endfunction()

# 1. find_package against the prefix
set(b1 "${work}/consumer-installed")
run("configure examples/consumer (find_package)" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/consumer" -B "${b1}"
    ${gen_args} "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON)
file(READ "${b1}/CMakeCache.txt" cache)
if(NOT cache MATCHES "chainlet_DIR:PATH=${prefix}")
  message(FATAL_ERROR "find_package(chainlet) did not pick the test prefix ${prefix}")
endif()
run("build examples/consumer (find_package)" "${CMAKE_COMMAND}" --build "${b1}" ${config_args})
run("run examples/consumer (find_package)" "${b1}/consumer")
check_consumer_output("${out}" "consumer (installed package)")

# The installed targets name no build-only dependency (nlohmann_json is private to the compiled part).
file(GLOB installed_targets "${prefix}/*/cmake/chainlet/chainletTargets*.cmake")
foreach(f IN LISTS installed_targets installed_pc)
  file(READ "${f}" text)
  if(text MATCHES "nlohmann|CLI11|Catch2|benchmark|Eigen")
    message(FATAL_ERROR "${f} names a build-only dependency (${CMAKE_MATCH_0}); consumers would need it")
  endif()
endforeach()

# 2. add_subdirectory of the source tree, with no CHAINLET_* option set: below the top level chainlet
# must configure and build its library alone. The test, example and benchmark dependencies are made
# unfindable (a REQUIRED find_package of a disabled package is a configure error), and the chainlet
# build directory must hold no tests/, examples/ or bench/ and ctest no test.
set(b2 "${work}/consumer-subdirectory")
run("configure examples/consumer (add_subdirectory)" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/consumer" -B "${b2}"
    ${gen_args} "-DCHAINLET_SOURCE_DIR=${SOURCE_DIR}" -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
foreach(d tests examples bench)
  if(EXISTS "${b2}/chainlet/${d}")
    message(FATAL_ERROR "add_subdirectory(chainlet) configured its ${d}/ (${b2}/chainlet/${d})")
  endif()
endforeach()
file(READ "${b2}/CMakeCache.txt" cache)
foreach(v CHAINLET_BUILD_TESTS CHAINLET_BUILD_EXAMPLES CHAINLET_BUILD_BENCHMARKS CHAINLET_KERNEL_INSTANCES)
  if(NOT cache MATCHES "${v}:BOOL=OFF")
    message(FATAL_ERROR "add_subdirectory(chainlet): ${v} is not OFF by default")
  endif()
endforeach()
run("build examples/consumer (add_subdirectory)" "${CMAKE_COMMAND}" --build "${b2}" ${config_args})
run("list the tests of examples/consumer (add_subdirectory)" "${CMAKE_CTEST_COMMAND}" --test-dir "${b2}" -N)
if(NOT out MATCHES "Total Tests: 0")
  message(FATAL_ERROR "add_subdirectory(chainlet) registered tests:\n${out}")
endif()
run("run examples/consumer (add_subdirectory)" "${b2}/consumer")
check_consumer_output("${out}" "consumer (add_subdirectory)")

# 3. pkg-config
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} "")
get_filename_component(pcdir "${installed_pc}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run("pkg-config --cflags --libs chainlet" "${PKG_CONFIG}" --cflags --libs chainlet)
string(STRIP "${out}" flags)
message(STATUS "pkg-config flags: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
run("compile with pkg-config flags" "${CXX_COMPILER}" -std=c++20 -O2 ${sanitize_flags}
    "${SOURCE_DIR}/tests/install/pkgconfig_main.cpp" ${flags} -o "${work}/pkgconfig_main")
run("run the pkg-config program" "${work}/pkgconfig_main")
if(NOT out MATCHES "before=([^ ]+) after=([^ \n]+)")
  message(FATAL_ERROR "pkg-config program: unexpected output:\n${out}")
endif()
message(STATUS "pkg-config program: before=${CMAKE_MATCH_1} after=${CMAKE_MATCH_2}")
message(STATUS "installed-package test passed")
