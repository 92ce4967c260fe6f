# tunedb.cmake — the tuning database (autotune/tunedb*.c, target.c) and `pock db`; included
# from tests/CMakeLists.txt.
pk_add_test(test_tunedb LIBS pk_autotune LABELS autotune sanitize)
pk_add_test(test_tunedb_concurrency LIBS pk_autotune LABELS autotune sanitize)

# A small database for the CLI test: real workloads from example TE files, this device's
# fingerprint, records of every status.
add_executable(tunedb_fixture tunedb_fixture.c)
target_link_libraries(tunedb_fixture PRIVATE pk_autotune)
add_test(NAME test_db_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_db_cli.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:tunedb_fixture> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_db_cli PROPERTIES LABELS "cli;autotune" TIMEOUT 300)

# Finding 6: `pock db` verbs leave another application's SQLite file byte-identical.
add_executable(test_db_foreign test_db_foreign.c)
target_link_libraries(test_db_foreign PRIVATE pk_autotune)
add_test(NAME test_db_foreign COMMAND test_db_foreign $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_db_foreign PROPERTIES LABELS "cli;autotune" TIMEOUT 60)
