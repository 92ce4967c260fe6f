# onnx_math.cmake — the ONNX importer's math converters (frontends/onnx/onnx_ops_math.c,
# onnx_fold_math.c) on the fixtures of scripts/onnx_make_cases.py.
pk_add_test(test_onnx_math LIBS pk_frontends LABELS frontend onnx sanitize TIMEOUT 60)
