# aarch64.cmake — a device build (POCK_DEVICE_ONLY) cross-compiled for AArch64
# (cmake/aarch64-linux-gnu.cmake): ctest runs each test under qemu-aarch64, and the
# codegen tests build their kernels with the cross compiler (scripts/aarch64-qemu-cc.sh),
# which qemu starts on the host. Timings under qemu mean nothing; no test here reports one.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  get_property(pk_device_tests DIRECTORY PROPERTY TESTS)
  foreach(t ${pk_device_tests})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
      "CC=${PROJECT_SOURCE_DIR}/scripts/aarch64-qemu-cc.sh")
  endforeach()
endif()
# as in the host build: long (minutes under qemu), so `ctest -LE slow` leaves it out
set_property(TEST test_random_schedule APPEND PROPERTY LABELS slow)
