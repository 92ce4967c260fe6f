# example_cnn.cmake — issue 23's conv-net examples (examples/mobilenet_v2, examples/resnet18)
# at the tiny size: each README's path (export, image data, pretrain full, fine-tune the
# pockengine spec from the saved weights, eval) end to end. Needs a Python with onnx and
# torch (POCK_ONNX_PYTHON, tests/onnx_cli.cmake), else skipped (77).
foreach(model mobilenet_v2 resnet18)
  add_test(NAME test_example_${model} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_example_cnn.sh
    $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR} ${model})
  set_tests_properties(test_example_${model} PROPERTIES LABELS "example;cli;onnx" TIMEOUT 120
    SKIP_RETURN_CODE 77
    ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")
endforeach()
