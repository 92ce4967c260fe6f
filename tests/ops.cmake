# Tests of the reference interpreter, the verifier and the operator library (te/ops).
pk_add_test(test_interp LABELS te sanitize)
pk_add_test(test_ops LABELS te sanitize)
# attention, softmax family, pooling, activations: their kernels get tuning spaces whose
# sampled candidates build and equal the interpreter.
pk_add_test(test_attn_spaces LIBS pk_autotune LABELS te autotune TIMEOUT 120)
