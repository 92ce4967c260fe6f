# harden.cmake — the runtime under hostile input and alone on a fleet device: the fuzz
# corpora replayed and a 60-second libFuzzer run of every target, artifact format versions,
# target fingerprints, a sanitized training run, allocations per step, and isolation (no compiler,
# allowed DT_NEEDED only, no program executed).

# Helpers (not tests): the artifact tool, and a runtime-only trainer for test_isolation.
add_executable(pk_artifact_tool pk_artifact_tool.c)
target_link_libraries(pk_artifact_tool PRIVATE pockrt_static)
add_executable(isolation_train isolation_train.c)
target_link_libraries(isolation_train PRIVATE pockrt)
# Found next to itself, as a shipped program would be: never through the build tree.
set_target_properties(isolation_train PROPERTIES BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "\$ORIGIN")

# Each committed fuzz corpus (fuzz/corpus/NAME) as a regression test, in every build
# (libFuzzer or not): fuzz_NAME_replay runs each file through the target once.
include(${PROJECT_SOURCE_DIR}/fuzz/targets.cmake)
foreach(t ${POCK_FUZZ_TARGETS})
  pock_fuzz_executable(fuzz_${t}_replay ${t} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.c)
endforeach()
# The artifact corpus's test keeps its first name.
add_test(NAME test_fuzz_corpus COMMAND fuzz_artifact_replay ${PROJECT_SOURCE_DIR}/fuzz/corpus/artifact)
set_tests_properties(test_fuzz_corpus PROPERTIES LABELS "runtime;fuzz;sanitize" TIMEOUT 60)
foreach(t graph sparse pkw csv npy jsonl onnx remote)
  add_test(NAME test_fuzz_corpus_${t} COMMAND fuzz_${t}_replay ${PROJECT_SOURCE_DIR}/fuzz/corpus/${t})
  set_tests_properties(test_fuzz_corpus_${t} PROPERTIES LABELS "fuzz;sanitize" TIMEOUT 60)
endforeach()

# libFuzzer on every target, 60 seconds in all (its own clang build under this build
# directory; building it is not counted); skipped with a message when clang's libFuzzer
# is missing. Not in fuzz builds themselves.
if(NOT POCK_FUZZ)
  add_test(NAME test_fuzz_60s COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh all 60)
  # The timeout covers the first build of every target's clang build (minutes on 2 cores).
  set_tests_properties(test_fuzz_60s PROPERTIES LABELS "fuzz" TIMEOUT 1200
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

# Findings 9 and 11 at the command line: values an f32 model cannot hold, a loss that
# turns non-finite, a .pkw with no tensors, an empty TE file.
add_test(NAME test_bad_values COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_values.sh
  $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_bad_values PROPERTIES LABELS "cli;runtime" TIMEOUT 120
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
