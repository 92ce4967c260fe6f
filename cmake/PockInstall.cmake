# PockInstall.cmake — `cmake --install`: libpockrt (shared and static), the public headers
# (include/pock), pock, pock-rt, pock-rt-serve, the pkg-config file pockrt.pc and the CMake package
# (find_package(Pock) → Pock::pockrt, Pock::pockrt_static). Included from the top level
# after every target exists. The package files are relocatable: they find the prefix from
# their own location, so `cmake --install build --prefix DIR` works for any DIR.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The package's target names inside this build too, so examples/runtime builds unchanged
# here and against an installed Pock.
add_library(Pock::pockrt ALIAS pockrt)
add_library(Pock::pockrt_static ALIAS pockrt_static)

install(TARGETS pockrt pockrt_static pock pock-rt pock-rt-serve
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/examples/runtime/train_digits.c
  ${PROJECT_SOURCE_DIR}/examples/runtime/CMakeLists.txt
  ${PROJECT_SOURCE_DIR}/examples/runtime/Makefile
  ${PROJECT_SOURCE_DIR}/examples/runtime/README.md
  DESTINATION ${CMAKE_INSTALL_DATADIR}/pock/examples/runtime)

# Paths from each package file's directory back to the prefix.
file(RELATIVE_PATH POCK_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
set(POCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Pock)
file(RELATIVE_PATH POCK_CMAKE_TO_PREFIX "/p/${POCK_CMAKE_DIR}" "/p")
string(REGEX REPLACE "/$" "" POCK_PC_TO_PREFIX "${POCK_PC_TO_PREFIX}")
string(REGEX REPLACE "/$" "" POCK_CMAKE_TO_PREFIX "${POCK_CMAKE_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/pockrt.pc.in ${PROJECT_BINARY_DIR}/pockrt.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/PockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PockConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PockConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pockrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${PROJECT_BINARY_DIR}/PockConfig.cmake ${PROJECT_BINARY_DIR}/PockConfigVersion.cmake
  DESTINATION ${POCK_CMAKE_DIR})
