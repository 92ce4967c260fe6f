# bench_train.cmake — bench/bench_train.py (issue 23's benchmark) as a smoke test: one
# digits row at 1 round, 2 steps; asserts the table's contents, never timing. Labelled
# slow: each PyTorch worker process imports torch (seconds on a loaded machine).
add_test(NAME test_bench_train COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_train.sh
  ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(test_bench_train PROPERTIES LABELS "bench;slow" TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")
