# runtime.cmake — libpockrt's tests, included from tests/CMakeLists.txt: test_runtime and
# the hand-written kernel objects it loads (a good one, and one with a wrong ABI version).
add_library(pk_kernel_fixture MODULE fixtures/kernel_fixture.c)
add_library(pk_kernel_fixture_bad_abi MODULE fixtures/kernel_fixture.c)
target_compile_definitions(pk_kernel_fixture_bad_abi PRIVATE PK_FIXTURE_ABI_VERSION=999)
foreach(t pk_kernel_fixture pk_kernel_fixture_bad_abi)
  # Like generated kernel objects: pkrt_module is the only exported symbol.
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${t} PRIVATE -fvisibility=hidden)
endforeach()

pk_add_test(test_runtime LABELS runtime sanitize)
target_compile_definitions(test_runtime PRIVATE
  PK_FIXTURE_SO="$<TARGET_FILE:pk_kernel_fixture>"
  PK_FIXTURE_BAD_ABI_SO="$<TARGET_FILE:pk_kernel_fixture_bad_abi>")
add_dependencies(test_runtime pk_kernel_fixture pk_kernel_fixture_bad_abi)

# The file rules every reader and writer goes through (FIFOs, devices, links, inputs).
pk_add_test(test_rt_file LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
