# onnx_cli.cmake — issue 17's commands (pock inspect, pock export, compile's ONNX training
# options, train --no-shuffle) end to end; onnxruntime checks the exported model. Needs a
# Python with onnx and onnxruntime: POCK_ONNX_PYTHON (configure-time cache variable or the
# environment), else python3; skipped (77) without one.
set(POCK_ONNX_PYTHON "$ENV{POCK_ONNX_PYTHON}" CACHE STRING
  "a Python with onnx and onnxruntime for the ONNX tests (empty: python3)")
add_test(NAME test_onnx_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_onnx_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_onnx_cli PROPERTIES LABELS "cli;onnx" TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")

# The example models (tests/fixtures/onnx-models, opset 17): compile with the fixture's
# sparse scheme, train, export, and onnxruntime on the export equals pock-rt run --scores.
add_test(NAME test_onnx_export_models COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_onnx_export_models.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_onnx_export_models PROPERTIES LABELS "cli;onnx" TIMEOUT 180
  SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")

# -- issue 23, the LLaMA example (examples/llama/README.md) --
# Its README's commands at the tiny size: export, data (8-byte windows), compile full and
# PockEngine-style, pretrain, fine-tune from the pretrained weights, eval; the losses fall.
# Needs POCK_ONNX_PYTHON with onnx and torch (else 77). About 8 s of CPU, 5 of it PyTorch's
# export.
add_test(NAME test_example_llama COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_example_llama.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_example_llama PROPERTIES LABELS "cli;onnx;example" TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")

# ---- issue 23, ONNX Runtime training worker (bench/ort_train_worker.py) ----
# The benchmark's ORT column: its first losses and its test loss after them equal
# PyTorch's (BN model with running statistics copied back; per-token LM with AdamW in
# PyTorch's mode). Needs onnxruntime-training and torch in POCK_ONNX_PYTHON, else skipped (77).
if(POCK_ONNX_PYTHON)
  set(pock_ort_python ${POCK_ONNX_PYTHON})
else()
  set(pock_ort_python python3)
endif()
# (~7 s of CPU, most of it importing torch; the other cases: run the script by hand.)
add_test(NAME test_ort_train_worker COMMAND ${pock_ort_python}
  ${PROJECT_SOURCE_DIR}/bench/ort_train_check.py --models mobilenet_v2,llama
  --cases full/adamw --steps 3)
set_tests_properties(test_ort_train_worker PROPERTIES LABELS "onnx;bench" TIMEOUT 300
  SKIP_RETURN_CODE 77)
