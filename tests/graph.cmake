# Tests of graph/: the IR, the sparse-update spec, the training-graph builder and the
# memory planner.
pk_add_test(test_graph LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_sparse LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_train LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_numeric LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
# Random graphs through pk_compile and the runtime, each training step equal to the
# interpreter's. Both stages (sanitizer and normal) share one kernel cache: the generated C
# is the same, so the second stage builds nothing.
pk_add_test(test_random_graph LIBS pk_driver pockrt_static LABELS graph driver sanitize TIMEOUT 600)
set_tests_properties(test_random_graph PROPERTIES
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
# Batch norm and buffers: JSON roles and bn_mode, modes and running-stats updates in the
# training graph, the buffers region, and an artifact's checkpoints and weights.
pk_add_test(test_norm_graph LIBS pk_driver pockrt_static LABELS graph driver TIMEOUT 120)
# dropout in a trained model: the graph's (seed, step) tensor, p = 0, evaluation, seeds.
pk_add_test(test_dropout_graph LIBS pk_driver pockrt_static LABELS graph driver TIMEOUT 120)
