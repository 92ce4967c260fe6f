# issue 18 (codegen half): GPU lowering check, CUDA/OpenCL emitter, NVRTC, barrier checker.
# None needs a GPU; the NVRTC test skips (77) where libnvrtc does not load.
pk_add_test(test_gpu_codegen LIBS pk_codegen LABELS codegen gpu sanitize)
pk_add_test(test_gpu_presets LIBS pk_autotune LABELS autotune gpu sanitize)
pk_add_test(test_gpu_nvrtc LIBS pk_autotune LABELS codegen gpu)
set_tests_properties(test_gpu_nvrtc PROPERTIES SKIP_RETURN_CODE 77)
pk_add_test(test_gpu_barrier LIBS pk_autotune LABELS codegen gpu sanitize)
