# Tests of the tuner's search (autotune/): config spaces, features, cost model, tuners and
# budget with nothing compiled (test_search; it compares the spaces' presets with
# bench/hand_schedules.c, so it builds that file in), and real kernels from sampled
# configs checked against the interpreter (test_search_kernels).
pk_add_test(test_search LIBS pk_autotune LABELS autotune sanitize)
target_sources(test_search PRIVATE ${PROJECT_SOURCE_DIR}/bench/hand_schedules.c)
target_include_directories(test_search PRIVATE ${PROJECT_SOURCE_DIR}/bench)
pk_add_test(test_search_kernels LIBS pk_autotune LABELS autotune sanitize)
# Weight gradients with their reduction split across threads (rfactor_threads): every value
# of the knob against the interpreter.
pk_add_test(test_rfactor_threads LIBS pk_autotune LABELS autotune)
