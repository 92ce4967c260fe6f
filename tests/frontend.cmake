# frontend.cmake — the JSON graph frontend (frontends/): graphs, errors, .pkw, fuzz.
pk_add_test(test_frontend LIBS pk_frontends LABELS frontend sanitize TIMEOUT 60)

# scripts/torch2pock.py (PyTorch module -> graph JSON via torch.fx), checked against PyTorch.
add_test(NAME test_torch2pock COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_torch2pock.sh
  ${PROJECT_SOURCE_DIR})
set_tests_properties(test_torch2pock PROPERTIES LABELS "frontend" TIMEOUT 120
  SKIP_RETURN_CODE 77)

