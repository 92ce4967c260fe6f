# Tests of schedules (schedule/): the primitives and their legality, the derived stages
# checked against the interpreter, and the JSON trace (round trips, malformed input, fuzz).
pk_add_test(test_schedule LIBS pk_schedule LABELS schedule sanitize)
pk_add_test(test_schedule_rewrite LIBS pk_schedule LABELS schedule sanitize)
pk_add_test(test_schedule_trace LIBS pk_schedule LABELS schedule sanitize TIMEOUT 300)
