# Lowering of schedules: the index simplifier, and scheduled kernels against the interpreter.
pk_add_test(test_lower_sched LIBS pk_codegen LABELS schedule)
