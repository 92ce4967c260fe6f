# Targets as data: the target grammar and descriptions, vector code for each x86 width
# (every sampled matmul and conv config lowers and emits; each width builds), the backend
# table's slots and the build time limit (test_targets); `pock compile --target` and a
# foreign target's artifact refused at load (test_targets_cli).
pk_add_test(test_targets LIBS pk_autotune LABELS codegen autotune sanitize TIMEOUT 300)
add_test(NAME test_targets_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_targets_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_targets_cli PROPERTIES LABELS "driver;cli" TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# issue 19: AArch64 targets — hwcap names, Arm CPU descriptions from aarch64-linux-gnu-gcc,
# a cross-compiled artifact's fingerprint checked against described Arm devices.
pk_add_test(test_aarch64_target LIBS pk_driver pk_autotune LABELS codegen autotune TIMEOUT 120)
# issue 19: the AArch64 device build's unit tests and the digits CNN under qemu-aarch64
# (cross-compiled artifact trained 10 steps, weights within 1e-5 of this host's).
# Its first run builds the device tree (libpockrt with the GPU runtime, the unit tests): over
# 180 s on a loaded 2-core machine, so the limit leaves room.
add_executable(pkw_close pkw_close.c)
target_link_libraries(pkw_close PRIVATE pockrt_static m)
add_test(NAME test_aarch64_qemu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_aarch64_qemu.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:pkw_close> ${PROJECT_SOURCE_DIR}
  ${PROJECT_BINARY_DIR})
set_tests_properties(test_aarch64_qemu PROPERTIES LABELS "cli;aarch64" TIMEOUT 420
  RESOURCE_LOCK aarch64_build # (test_remote_tune builds in the same directory)
  SKIP_RETURN_CODE 77 ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
