# Operator gradients and training ops (te/ops): finite differences through the
# interpreter, tie rules, optimizer formulas; and every gradient through generated C.
pk_add_test(test_op_grad LABELS te sanitize TIMEOUT 120)
pk_add_test(test_op_grad_codegen LIBS pk_codegen LABELS te codegen TIMEOUT 300)
# conv2d's strided dX (phase form) against the transposed-window oracle, its work, and its
# schedules.
pk_add_test(test_conv_dx LIBS pk_autotune LABELS te autotune TIMEOUT 120)
