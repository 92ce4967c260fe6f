# onnx_tests.cmake — the ONNX importer against references (issue 17): onnx 1.16.2's backend
# node tests (tests/fixtures/onnx-node, scope.txt) and the converters' own cases
# (tests/fixtures/onnx-ops), run through the TE interpreter, and the models it must refuse
# (tests/fixtures/onnx-refused); what each converter family imports to; the example models
# exported by PyTorch (tests/fixtures/onnx-models, scripts/export_onnx_fixtures.py).

# Conformance and refusals, the one runner of the fixtures (under a second; also under
# ASan, as the family tests it replaced were: the refusal paths are bad input); reads the
# models with the generated protobuf-c code too.
pk_add_test(test_onnx_node LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)
target_include_directories(test_onnx_node PRIVATE ${PROJECT_BINARY_DIR}/frontends/onnx)
# The math, nn and shape converters' op lists, roles and translations (test_onnx_convert.c's
# table over tests/fixtures/onnx-ops).
pk_add_test(test_onnx_convert LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)

# The example models (tiny) exported at opsets 13 and 17: per model, test_train_equiv on its
# fixture directory: import, compile, forward on batch 1 equals PyTorch's, then 5 SGD steps
# of a sparse scheme equal PyTorch's losses and weights within 1e-4 (test_train_equiv.c's
# ONNX block).
foreach(model mobilenet_v2 resnet18 bert llama)
  add_test(NAME test_onnx_models_${model} COMMAND test_train_equiv
    ${PROJECT_SOURCE_DIR}/tests/fixtures/onnx-models/${model})
  set_tests_properties(test_onnx_models_${model} PROPERTIES LABELS "onnx;train;driver"
    TIMEOUT 120 ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
endforeach()

# The importer's core on models the test builds with the generated protobuf-c code: tensor
# data (typed, raw, external files kept inside the model's directory), a Transpose-reached
# weight's name, batch and --input-shape bindings, refusals, the training JSON beside it.
pk_add_test(test_onnx_import LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)
target_include_directories(test_onnx_import PRIVATE ${PROJECT_BINARY_DIR}/frontends/onnx)
