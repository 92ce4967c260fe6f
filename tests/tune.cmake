# `pock tune` and `pock report` end to end.
add_test(NAME test_tune_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_tune_cli.sh $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_tune_cli PROPERTIES LABELS "autotune;cli" TIMEOUT 600
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# Confirmed winners: a lucky timing does not become db best (test timing hook, deterministic).
pk_add_test(test_tune_confirm LIBS pk_autotune LABELS autotune)
# Transfer: a new shape's first batch holds the nearest tuned shape's best (test timing hook).
pk_add_test(test_tune_transfer LIBS pk_autotune LABELS autotune)
