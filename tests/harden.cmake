# harden.cmake — the runtime under hostile input and alone on a fleet device: the fuzz
# corpus replayed and a 60-second libFuzzer run, artifact format versions, target
# fingerprints, a sanitized training run, allocations per step, and isolation (no compiler,
# allowed DT_NEEDED only, no program executed).

# Helpers (not tests): the artifact tool, and a runtime-only trainer for test_isolation.
add_executable(pk_artifact_tool pk_artifact_tool.c)
target_link_libraries(pk_artifact_tool PRIVATE pockrt_static)
add_executable(isolation_train isolation_train.c)
target_link_libraries(isolation_train PRIVATE pockrt)
# Found next to itself, as a shipped program would be: never through the build tree.
set_target_properties(isolation_train PROPERTIES BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "\$ORIGIN")

# The committed fuzz corpus as a regression test, in every build (libFuzzer or not).
add_executable(fuzz_artifact_replay ${PROJECT_SOURCE_DIR}/fuzz/fuzz_artifact.c
  ${PROJECT_SOURCE_DIR}/fuzz/no_load.c ${PROJECT_SOURCE_DIR}/fuzz/replay_main.c)
target_link_libraries(fuzz_artifact_replay PRIVATE pockrt_static)
target_include_directories(fuzz_artifact_replay PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
target_link_options(fuzz_artifact_replay PRIVATE -Wl,--wrap=pkrt_module_load_memory,--wrap=dlopen)
add_test(NAME test_fuzz_corpus COMMAND fuzz_artifact_replay ${PROJECT_SOURCE_DIR}/fuzz/corpus)
set_tests_properties(test_fuzz_corpus PROPERTIES LABELS "runtime;fuzz;sanitize" TIMEOUT 60)

# 60 seconds of libFuzzer (its own clang build under this build directory); skipped with a
# message when clang's libFuzzer is missing. Not in fuzz builds themselves.
if(NOT POCK_FUZZ)
  add_test(NAME test_fuzz_artifact_60s COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh 60)
  set_tests_properties(test_fuzz_artifact_60s PROPERTIES LABELS "fuzz" TIMEOUT 600
    SKIP_RETURN_CODE 77 ENVIRONMENT "FUZZ_BUILD_DIR=${PROJECT_BINARY_DIR}/fuzz-build")
endif()

pk_add_test(test_artifact_versions LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
pk_add_test(test_fingerprint LIBS pk_driver pockrt_static LABELS runtime driver sanitize
  TIMEOUT 120)
# Compiles the digits MLP and CNN and trains them through the runtime: CI runs it under
# ASan+UBSan+LSan (label sanitize).
pk_add_test(test_sanitized_train LIBS pk_driver pockrt_static LABELS runtime train sanitize
  TIMEOUT 120)
# Counts malloc-family and mmap calls of the whole process (it defines them, so libpockrt,
# libffi and the kernel object all come through it) during training steps 2..N.
if(NOT POCK_SANITIZE AND NOT POCK_FUZZ)
  pk_add_test(test_step_allocs LIBS pk_driver pockrt_static LABELS runtime TIMEOUT 120)
endif()

# pock-rt (cli/) and the example program (examples/runtime/, added after tests/) join the
# test when they exist; TARGET_EXISTS is decided once every directory is read.
add_test(NAME test_isolation COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_isolation.sh
  ${PROJECT_SOURCE_DIR} $<TARGET_FILE:pock> $<TARGET_FILE:pk_artifact_tool>
  $<TARGET_FILE:isolation_train> $<TARGET_FILE:pockrt>
  "$<$<TARGET_EXISTS:pock-rt>:$<TARGET_FILE:pock-rt>>"
  "$<$<TARGET_EXISTS:train_digits>:$<TARGET_FILE:train_digits>>")
set_tests_properties(test_isolation PROPERTIES LABELS "runtime;cli" TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")

# Regression tests of the reliability findings in the compiler and the loader (a backward
# graph reading a tensor twice, a truncated kernel object, a tensor too large for the
# interpreter, the compiler out of memory).
add_test(NAME test_reliability_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_reliability_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:pk_artifact_tool>)
set_tests_properties(test_reliability_cli PROPERTIES LABELS "cli;runtime" TIMEOUT 120
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
