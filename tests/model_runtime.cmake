# model_runtime.cmake — tests of the runtime's model side: .pkw weights, the artifact
# container, the model executor, datasets and the training loop.
pk_add_test(test_weights LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
# Builds its kernels with codegen (a test may use the compiler; libpockrt never does).
# --wrap counts the allocations libpockrt makes during steps 2..N (must be 0).
pk_add_test(test_model_runtime LIBS pk_codegen pockrt_static LABELS runtime sanitize TIMEOUT 120)
target_link_options(test_model_runtime PRIVATE
  -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc)
pk_add_test(test_data LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
