# Tests of the TE text form: parser, checker, bounds, canonical printer (te/).
pk_add_test(test_te_parse LABELS te sanitize)
pk_add_test(test_te_fuzz LABELS te sanitize TIMEOUT 120)
pk_add_test(test_te_fuse LABELS te sanitize)
