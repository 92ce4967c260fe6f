# frontend.cmake — the JSON graph frontend (frontends/): graphs, errors, .pkw, fuzz.
pk_add_test(test_frontend LIBS pk_frontends LABELS frontend sanitize TIMEOUT 60)
