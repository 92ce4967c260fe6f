# fleet.cmake — the fleet side: checkpoints (bit-identical resume, refusals, kill -9 during
# saves), the pock-rt command end to end, and `cmake --install` with the example program
# built against the installed package (find_package(Pock) and pkg-config).
# Compiles its artifacts with the driver (a test may use the compiler; pock-rt never does).
# --wrap counts libpockrt's allocations during checkpoint saves (must be 0).
pk_add_test(test_checkpoint LIBS pk_driver pockrt_static LABELS runtime sanitize TIMEOUT 120)
target_link_options(test_checkpoint PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)

add_test(NAME test_pock_rt COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_pock_rt.sh
  $<TARGET_FILE:pock-rt> $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_pock_rt PROPERTIES LABELS "cli;runtime" TIMEOUT 300
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")

# Installs this build into a temporary prefix; skipped (exit 77, with a message) without
# cmake on PATH.
add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh
  ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(test_install PROPERTIES LABELS "install;cli" TIMEOUT 300
  SKIP_RETURN_CODE 77 ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
