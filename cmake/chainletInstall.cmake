# Installation of chainlet: headers, the compiled library, a relocatable CMake package
# (find_package(chainlet CONFIG) -> chainlet::chainlet, with a SameMajorVersion version file) and a
# pkg-config file. Included from the top-level CMakeLists.txt after the `chainlet` target is defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CHAINLET_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/chainlet" CACHE STRING
    "Where the CMake package files are installed, relative to the prefix")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/chainlet" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp")
install(TARGETS chainlet EXPORT chainletTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT chainletTargets NAMESPACE chainlet:: DESTINATION "${CHAINLET_CMAKE_DIR}")

# The config re-finds the dependencies the exported target names (ZLIB::ZLIB, OpenMP::OpenMP_CXX)
# and locates the xsimd headers with find_path, as the top-level CMakeLists.txt does.
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/chainletConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/chainletConfig.cmake"
                              INSTALL_DESTINATION "${CHAINLET_CMAKE_DIR}")
# 0.x: SameMajorVersion accepts any 0.y >= the requested version.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/chainletConfigVersion.cmake"
                                 VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/chainletConfig.cmake" "${PROJECT_BINARY_DIR}/chainletConfigVersion.cmake"
        DESTINATION "${CHAINLET_CMAKE_DIR}")

# pkg-config: the same compile options as the CMake target's interface (SIMD flags, definitions,
# OpenMP), the static library and what it links. The prefix is found from the .pc file's own
# location, so `cmake --install build --prefix P` works for any P.
get_target_property(_chainlet_opts chainlet INTERFACE_COMPILE_OPTIONS)
get_target_property(_chainlet_defs chainlet INTERFACE_COMPILE_DEFINITIONS)
set(CHAINLET_PC_CFLAGS "")
foreach(_o IN LISTS _chainlet_opts)
  if(_o)
    string(APPEND CHAINLET_PC_CFLAGS " ${_o}")
  endif()
endforeach()
foreach(_d IN LISTS _chainlet_defs)
  if(_d)
    string(APPEND CHAINLET_PC_CFLAGS " -D${_d}")
  endif()
endforeach()
if(NOT XSIMD_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  string(APPEND CHAINLET_PC_CFLAGS " -I${XSIMD_INCLUDE_DIR}")
endif()
set(CHAINLET_PC_LIBS "-lchainlet -lz")
if(CHAINLET_OPENMP)
  string(APPEND CHAINLET_PC_CFLAGS " ${OpenMP_CXX_FLAGS}")
  string(APPEND CHAINLET_PC_LIBS " ${OpenMP_CXX_FLAGS}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CHAINLET_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(CHAINLET_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _rel "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(CHAINLET_PC_PREFIX "\${pcfiledir}/${_rel}")
  set(CHAINLET_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CHAINLET_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CHAINLET_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/chainlet.pc.in" "${PROJECT_BINARY_DIR}/chainlet.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/chainlet.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
