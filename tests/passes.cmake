# passes.cmake — issue 21's graph passes (graph/passes/): weights after 10 steps with all
# passes equal those with none, for the digits models and (with a Python that has onnx and
# torch: POCK_ONNX_PYTHON) the tiny example models, plus the --passes options.
add_test(NAME test_passes_equiv COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_passes_equiv.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_passes_equiv PROPERTIES LABELS "cli;passes" TIMEOUT 180
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")
