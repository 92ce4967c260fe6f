# gpu.cmake — issue 18, runtime half: libpockrt's GPU devices (pock/pkrt_gpu.h). OpenCL runs
# on any installed OpenCL device (PoCL's CPU device in CI); CUDA launches need a GPU and
# skip without one, but the driver's symbols are still resolved where a libcuda (or the
# toolkit's stub) exists and the declarations are checked against the toolkit's cuda.h.
pk_add_test(test_gpu_opencl LIBS pockrt_static LABELS runtime TIMEOUT 60)
# --wrap: libpockrt's own allocations during launches are counted (must be 0).
target_link_options(test_gpu_opencl PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)
set_tests_properties(test_gpu_opencl PROPERTIES SKIP_RETURN_CODE 77)
# PoCL caches built programs under $HOME unless told otherwise: keep them in the build tree.
set_property(TEST test_gpu_opencl APPEND PROPERTY ENVIRONMENT
  "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")

pk_add_test(test_gpu_cuda LIBS pockrt_static LABELS runtime TIMEOUT 60)
target_include_directories(test_gpu_cuda PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
target_link_options(test_gpu_cuda PRIVATE -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc)
set_tests_properties(test_gpu_cuda PROPERTIES SKIP_RETURN_CODE 77)
if(CUDAToolkit_FOUND)
  # cuda.h for the declaration check, the stub libcuda for symbol resolution, NVRTC
  # (by dlopen) to compile the test kernels where a GPU is present.
  find_library(POCK_CUDA_STUB NAMES cuda PATHS ${CUDAToolkit_LIBRARY_DIR}/stubs NO_DEFAULT_PATH)
  target_include_directories(test_gpu_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(test_gpu_cuda PRIVATE PK_HAVE_CUDA_H=1
    PK_CUDA_LIB_DIR="${CUDAToolkit_LIBRARY_DIR}"
    $<$<BOOL:${POCK_CUDA_STUB}>:PK_CUDA_STUB="${POCK_CUDA_STUB}">)
endif()

# libpockrt stays small and links neither OpenCL nor CUDA (readelf), stripped <= 200 KB.
add_test(NAME test_gpu_link COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_link.sh
  $<TARGET_FILE:pockrt> $<TARGET_FILE:pock-rt> "${CMAKE_BUILD_TYPE}")
set_tests_properties(test_gpu_link PROPERTIES LABELS "runtime" TIMEOUT 30 SKIP_RETURN_CODE 77)
