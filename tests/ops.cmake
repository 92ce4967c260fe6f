# Tests of the reference interpreter, the verifier and the operator library (te/ops).
pk_add_test(test_interp LABELS te sanitize)
pk_add_test(test_ops LABELS te sanitize)
pk_add_test(test_index_ops LIBS pk_autotune LABELS te codegen TIMEOUT 120)
