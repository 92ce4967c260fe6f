# `pock sparse-search` (issue 22): the budget error, the chosen spec within the budget, a
# rerun from the cache with no training; and its HTML report rendered in headless Chromium
# with one chart (skipped, 77, without chromium).
add_test(NAME test_sparse_search_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_sparse_search_cli.sh
  $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_sparse_search_cli PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
add_test(NAME test_sparse_search_screenshot COMMAND sh -c
  "HTML=sparse_search_sample.html ${CMAKE_CURRENT_SOURCE_DIR}/test_sparse_search_cli.sh $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR} >/dev/null && ${PROJECT_SOURCE_DIR}/scripts/report-screenshot.sh sparse_search_sample.html sparse_search_sample.png 1")
set_tests_properties(test_sparse_search_screenshot PROPERTIES LABELS "cli" TIMEOUT 300
  SKIP_RETURN_CODE 77 ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
