# The `pock` command end to end: exit codes, messages, examples.
add_test(NAME test_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.sh $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_cli PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# File rules end to end (issue 14): outputs, FIFO inputs, unreadable trust, write errors.
add_test(NAME test_files_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_files_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_files_cli PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# Integer labels (ignore_index) and the optimizer features (accumulation, global clipping,
# warmup) through compile and pock-rt train, with a resume inside an accumulation group.
add_test(NAME test_labels_optim_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_labels_optim_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_labels_optim_cli PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
