# Tests of graph/: the IR, the sparse-update spec, the training-graph builder and the
# memory planner.
pk_add_test(test_graph LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_sparse LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_train LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
pk_add_test(test_graph_numeric LIBS pk_graph LABELS graph sanitize TIMEOUT 60)
