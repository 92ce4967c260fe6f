# The `pock` command end to end: exit codes, messages, examples.
add_test(NAME test_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.sh $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_cli PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
