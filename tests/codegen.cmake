# Generated kernels against the interpreter (and OpenBLAS for matmul).
pk_add_test(test_ops_codegen LIBS pk_codegen LABELS codegen)
pk_add_test(test_random_te LIBS pk_codegen LABELS codegen)
pk_add_test(test_codegen_unit LIBS pk_codegen LABELS codegen sanitize)
pk_add_test(test_random_schedule LIBS pk_codegen pk_te LABELS codegen schedule TIMEOUT 600)
pk_add_test(test_cc_select LIBS pk_codegen LABELS codegen sanitize)
pk_add_test(test_partition LIBS pk_codegen LABELS codegen schedule sanitize)
