# The driver (`pock compile`): lowering through views, compiled models against the
# interpreter, and the compile/train/eval command line end to end.
pk_add_test(test_driver_strides LIBS pk_codegen LABELS driver sanitize TIMEOUT 60)
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_driver.c)
  pk_add_test(test_driver LIBS pk_driver LABELS driver TIMEOUT 120)
endif()
add_test(NAME test_compile_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_compile_cli.sh
  $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_compile_cli PROPERTIES LABELS "driver;cli" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# graph I/O: a model with several named inputs (one batch-less) through compile, train,
# eval and run, equal to its one-input reference.
add_test(NAME test_inputs_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_inputs_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt>)
set_tests_properties(test_inputs_cli PROPERTIES LABELS "driver;cli" TIMEOUT 120
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# Transformer sparse specs: blocks by name prefix, half the input channels of a linear
# layer on a rank-3 input, compiled and trained: exactly the selection moves.
add_test(NAME test_blocks_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_blocks_cli.sh
  $<TARGET_FILE:pock>)
set_tests_properties(test_blocks_cli PROPERTIES LABELS "driver;cli" TIMEOUT 120
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# --print-memory: workspace and backward-pass figures against numbers worked out by hand.
add_test(NAME test_print_memory COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_print_memory.sh
  $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_print_memory PROPERTIES LABELS "driver;cli" TIMEOUT 120
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
