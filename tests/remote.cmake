# remote.cmake — remote tuning (issue 19, docs/remote-tuning.md): the wire format and a
# fuzz of the server's request parser; the remote measurer against a pock-rt-serve on
# loopback (crash, hang, wrong, refused, replayed, malformed, over the cap); and one
# `pock tune --remote` driving an x86-64 server and an AArch64 one under qemu-aarch64.
pk_add_test(test_remote_wire LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
pk_add_test(test_remote_measure LIBS pk_autotune LABELS autotune TIMEOUT 120)
target_compile_definitions(test_remote_measure PRIVATE PK_SERVE="$<TARGET_FILE:pock-rt-serve>")
add_dependencies(test_remote_measure pock-rt-serve)
# (the AArch64 build directory is test_aarch64_qemu's too: one of them builds at a time; the
# first to run builds the device tree, over 180 s on a loaded 2-core machine, hence 420 s)
add_test(NAME test_remote_tune COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_remote_tune.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt-serve> ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set_tests_properties(test_remote_tune PROPERTIES LABELS "cli;aarch64" TIMEOUT 420
  SKIP_RETURN_CODE 77 RESOURCE_LOCK aarch64_build
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
