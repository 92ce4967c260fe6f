# `pock tune` and `pock report` end to end.
add_test(NAME test_tune_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_tune_cli.sh $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_tune_cli PROPERTIES LABELS "autotune;cli" TIMEOUT 600
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
