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
