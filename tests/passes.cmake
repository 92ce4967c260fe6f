# passes.cmake — issue 21: the graph passes (graph/passes/) keep the result (weights after
# 10 steps with all passes equal those with none: the digits models and, with a Python that
# has onnx and torch, POCK_ONNX_PYTHON, the tiny example models; the --passes options), and
# backend switching.
# (layout_db_fixture: a database where the digits CNN's NHWC kernels are faster, so that the
# layout pass's default choice, by tuning records, is NHWC)
add_executable(layout_db_fixture layout_db_fixture.c)
target_link_libraries(layout_db_fixture PRIVATE pk_driver)
add_test(NAME test_passes_equiv COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_passes_equiv.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR} $<TARGET_FILE:layout_db_fixture>)
set_tests_properties(test_passes_equiv PROPERTIES LABELS "cli;passes" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")

# Backend switching: a database where the OpenBLAS sgemm extern won a model's matmul tasks
# (records committed directly, nothing timed); the artifact calls it through libpockrt's
# libffi path, pock-rt info lists it, a missing library is refused at load by name.
add_executable(extern_db_fixture extern_db_fixture.c)
target_link_libraries(extern_db_fixture PRIVATE pk_driver)
add_test(NAME test_backend_switch COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_backend_switch.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:extern_db_fixture>
  $<TARGET_FILE:pockrt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_backend_switch PROPERTIES LABELS "cli;autotune;passes" TIMEOUT 120
  SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")

# Frozen-prefix caching (--cache-frozen): cached training gives the same weights, epochs
# after the first come from the cache, and each case it cannot serve is refused.
add_test(NAME test_cache_frozen COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_cache_frozen.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_cache_frozen PROPERTIES LABELS "cli;passes" TIMEOUT 180
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCK_ONNX_PYTHON=${POCK_ONNX_PYTHON}")

# The fold pass on a small graph through the interpreter: frozen batch norms folded into
# their conv (or an affine map), a frozen weight's transpose made at load, the same weights
# after 3 steps as without it, folded results with bytes of their own, the frozen prefix.
pk_add_test(test_fold LIBS pk_graph LABELS graph passes sanitize TIMEOUT 60)

# pk_te_relayout (the layout pass's rewrite): NHWC programs equal the originals, permuted;
# the conv-as-GEMM template takes an NHWC conv
pk_add_test(test_te_relayout LIBS pk_autotune LABELS te passes sanitize)

# Epilogues fused into a matmul (pk_te_fuse_epilogue, the fuse pass's second sweep): the
# fused program equals producer then consumer in the interpreter, and the matmul template's
# preset and sampled configs compute it at the register tile, never storing the product,
# and equal the interpreter as generated C.
pk_add_test(test_fuse_epilogue LIBS pk_autotune LABELS autotune passes)

# Prologues fused into a matmul's packed operand (pk_te_fuse_prologue, the fuse pass's last
# sweep) and the SGD update fused into its weight gradient's kernel: the fused program
# equals producer then consumer in the interpreter, and the matmul template's preset and
# sampled configs pack the prologue's operand (the panel evaluates it) or keep the update's
# product in registers, never storing the intermediate, and equal the interpreter as C.
pk_add_test(test_fuse_prologue LIBS pk_autotune LABELS autotune passes)
