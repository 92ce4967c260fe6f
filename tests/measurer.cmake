# measurer.cmake — the tuner's measurer (autotune/pk_measurer.h): statuses for illegal,
# uncompilable, crashing, hanging, wrong and failing kernels, extern sgemm, process hygiene.
pk_add_test(test_measurer LIBS pk_autotune LABELS autotune TIMEOUT 300)
