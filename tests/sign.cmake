# sign.cmake — artifact signing (docs/signing.md): the library end to end on a small real
# artifact (the fixture kernel object from runtime.cmake), and the `pock keygen/sign/verify`
# commands with `pock train` refusing what a trusted key did not sign.
pk_add_test(test_sign LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
set_tests_properties(test_sign PROPERTIES SKIP_RETURN_CODE 77)
target_compile_definitions(test_sign PRIVATE PK_FIXTURE_SO="$<TARGET_FILE:pk_kernel_fixture>")
add_dependencies(test_sign pk_kernel_fixture)
# Counts the loader's dlopen and memfd_create calls: a refused artifact must make none.
target_link_options(test_sign PRIVATE -Wl,--wrap=dlopen,--wrap=memfd_create)
add_test(NAME test_sign_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_sign_cli.sh
  $<TARGET_FILE:pock> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_sign_cli PROPERTIES LABELS "cli" TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
