# presets.cmake — the default schedules (autotune/space*.c presets) of every digits kernel
# build and equal the interpreter; conv and matmul kernels are never left unscheduled.
pk_add_test(test_presets LIBS pk_driver LABELS autotune driver TIMEOUT 120)
# portable defaults: matmul and conv presets at 16, 32 and 64-byte vectors lower and fit the registers
pk_add_test(test_preset_widths LIBS pk_autotune LABELS autotune)
