# The C backend's loop kinds (vectorized, parallel, unrolled) and emitted-source shape.
pk_add_test(test_emit_c LIBS pk_codegen LABELS codegen sanitize)
