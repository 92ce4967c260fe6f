# frontend.cmake — the JSON graph frontend (frontends/): graphs, errors, .pkw, fuzz.
pk_add_test(test_frontend LIBS pk_frontends LABELS frontend sanitize TIMEOUT 60)

# scripts/torch2pock.py (PyTorch module -> graph JSON via torch.fx), checked against PyTorch.
add_test(NAME test_torch2pock COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_torch2pock.sh
  ${PROJECT_SOURCE_DIR})
set_tests_properties(test_torch2pock PROPERTIES LABELS "frontend" TIMEOUT 120
  SKIP_RETURN_CODE 77)

# shape (test_onnx_shape.c): the ONNX shape, indexing and constant ops on the fixtures of
# scripts/onnx_make_shape_cases.py (tests/fixtures/onnx-ops, onnx-shape-errors).
pk_add_test(test_onnx_shape LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)
# ONNX nn converters (onnx_ops_nn.c) on scripts/onnx_make_nn_cases.py's models
pk_add_test(test_onnx_nn LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)
