# aarch64-linux-gnu.cmake — CMake toolchain file for AArch64 Linux (Jetson, Raspberry Pi
# OS 64-bit) with Debian's gcc-aarch64-linux-gnu and the :arm64 -dev packages installed
# multiarch (scripts/build-aarch64.sh). Tests run under qemu-aarch64 when it is installed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Libraries and headers: the cross libc's sysroot, then the multiarch :arm64 packages
# (/usr/lib/aarch64-linux-gnu, /usr/include); programs are this host's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config must see the :arm64 .pc files only, never this host's
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs the test programs under user-mode emulation. No `-L /usr/aarch64-linux-gnu`:
# the :arm64 -dev packages bring the multiarch libc6:arm64 (/lib/ld-linux-aarch64.so.1),
# and the cross sysroot's loader with that libc (a different build) hangs in
# pthread_create; the multiarch loader and libraries are one consistent set.
find_program(POCK_QEMU_AARCH64 qemu-aarch64)
if(POCK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${POCK_QEMU_AARCH64})
endif()
