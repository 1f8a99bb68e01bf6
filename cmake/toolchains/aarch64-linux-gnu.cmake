# Cross-compiling chainlet for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu, the test programs run
# under qemu-user (.ci/run's aarch64 stage):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DCHAINLET_SIMD=neon
# Needs g++-aarch64-linux-gnu, qemu-user and the arm64 zlib (dpkg --add-architecture arm64;
# apt-get install zlib1g-dev:arm64; scripts/install-deps.sh --aarch64 does all three).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs built here run through qemu (ctest, and Catch's test discovery at build time); -L gives it the
# Arm loader and libraries of the cross toolchain.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
# Libraries from the arm64 packages and the cross toolchain only; headers (xsimd, Catch2, Eigen,
# nlohmann/json are header-only) and CMake packages from the host as well.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
