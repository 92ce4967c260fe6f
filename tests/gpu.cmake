# gpu.cmake — issue 18. Runtime half: libpockrt's GPU devices (pock/pkrt_gpu.h). OpenCL runs
# on any installed OpenCL device (PoCL's CPU device in CI); CUDA launches need a GPU and
# skip without one, but the driver's symbols are still resolved where a libcuda (or the
# toolkit's stub) exists and the declarations are checked against the toolkit's cuda.h.
# (Not `sanitize`: PoCL and its LLVM leak at exit; libpockrt's part is clean under ASan.)
pk_add_test(test_gpu_opencl LIBS pockrt_static LABELS runtime TIMEOUT 60)
# --wrap: libpockrt's own allocations during launches are counted (must be 0).
pk_count_allocs(test_gpu_opencl)
set_tests_properties(test_gpu_opencl PROPERTIES SKIP_RETURN_CODE 77)
# PoCL caches built programs under $HOME unless told otherwise: keep them in the build tree.
set_property(TEST test_gpu_opencl APPEND PROPERTY ENVIRONMENT
  "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")

pk_add_test(test_gpu_cuda LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
target_include_directories(test_gpu_cuda PRIVATE ${PROJECT_SOURCE_DIR}/runtime)
pk_count_allocs(test_gpu_cuda)
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

# The CUDA path against a stand-in driver (fixtures/mock_libcuda.c), on every machine: the
# mock is the only libcuda.so.1 on the test's LD_LIBRARY_PATH.
add_library(pk_mock_libcuda MODULE fixtures/mock_libcuda.c)
target_include_directories(pk_mock_libcuda PRIVATE ${PROJECT_SOURCE_DIR}/runtime
  ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(pk_mock_libcuda PRIVATE -fvisibility=hidden)
set_target_properties(pk_mock_libcuda PROPERTIES PREFIX "lib" OUTPUT_NAME "cuda" SUFFIX ".so.1"
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mock-cuda)
pk_add_test(test_gpu_cuda_mock LIBS pockrt_static LABELS runtime sanitize TIMEOUT 60)
pk_count_allocs(test_gpu_cuda_mock)
add_dependencies(test_gpu_cuda_mock pk_mock_libcuda)
set_property(TEST test_gpu_cuda_mock APPEND PROPERTY ENVIRONMENT
  "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/mock-cuda" "PK_CUBLAS_MLP=${PK_CUBLAS_MLP}")

# cuBLAS as the CUDA extern kernel against a stand-in libcublas beside the stand-in driver,
# named as the first soname the runtime tries (PKRT_CUBLAS_LIBRARIES): the default finds it.
add_library(pk_mock_libcublas MODULE fixtures/mock_libcublas.c)
target_compile_options(pk_mock_libcublas PRIVATE -fvisibility=hidden)
target_link_libraries(pk_mock_libcublas PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(pk_mock_libcublas PROPERTIES PREFIX "lib" OUTPUT_NAME "cublas"
  SUFFIX ".so.13" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/mock-cuda)
# Its model part opens a CUDA artifact built first, apart (it also fills the kernel cache
# test_gpu_cublas_tune compiles the same kernels from). No NVRTC: no artifact, and that
# part is skipped.
set(PK_CUBLAS_MLP ${CMAKE_CURRENT_BINARY_DIR}/cublas_mock_mlp.pock)
add_test(NAME test_gpu_cublas_mock_build COMMAND sh -c "\"$1\" compile \"$2\" --batch 8 \
  --target 'cuda -arch=sm_87' -o \"$3\" || rm -f \"$3\"" sh $<TARGET_FILE:pock>
  ${PROJECT_SOURCE_DIR}/examples/digits/models/mlp.json ${PK_CUBLAS_MLP})
set_tests_properties(test_gpu_cublas_mock_build PROPERTIES LABELS "runtime" TIMEOUT 60
  FIXTURES_SETUP cublas_mock_mlp ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
pk_add_test(test_gpu_cublas_mock LIBS pk_autotune pockrt_static LABELS runtime sanitize TIMEOUT 60)
target_link_options(test_gpu_cublas_mock PRIVATE -Wl,--wrap=malloc,--wrap=calloc)
add_dependencies(test_gpu_cublas_mock pk_mock_libcuda pk_mock_libcublas)
set_tests_properties(test_gpu_cublas_mock PROPERTIES FIXTURES_REQUIRED cublas_mock_mlp)
set_property(TEST test_gpu_cublas_mock APPEND PROPERTY ENVIRONMENT
  "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/mock-cuda" "PK_CUBLAS_MLP=${PK_CUBLAS_MLP}")

# The measurer on a CUDA target measures the cuBLAS candidate (checked on the device, timed
# with device events), against the same stand-ins; 77 without NVRTC.
pk_add_test(test_measure_cublas_mock LIBS pk_autotune LABELS autotune gpu sanitize TIMEOUT 60)
add_dependencies(test_measure_cublas_mock pk_mock_libcuda pk_mock_libcublas)
set_tests_properties(test_measure_cublas_mock PROPERTIES SKIP_RETURN_CODE 77)
set_property(TEST test_measure_cublas_mock APPEND PROPERTY ENVIRONMENT
  "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/mock-cuda")
# `pock tune --target 'cuda -arch=sm_87'` on the stand-ins makes cuBLAS the best record of
# the MLP's first matmul, and `pock compile --db` makes that kernel a cuBLAS call (the
# kernel cache the artifact fixture filled keeps it fast); 77 without NVRTC.
add_test(NAME test_gpu_cublas_tune COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_cublas_tune.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_gpu_cublas_tune PROPERTIES LABELS "cli;autotune;gpu" TIMEOUT 60
  SKIP_RETURN_CODE 77 FIXTURES_REQUIRED cublas_mock_mlp)
set_property(TEST test_gpu_cublas_tune APPEND PROPERTY ENVIRONMENT
  "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache"
  "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/mock-cuda")

# libpockrt stays small and links neither OpenCL nor CUDA (readelf), stripped <= 200 KB.
add_test(NAME test_gpu_link COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_link.sh
  $<TARGET_FILE:pockrt> $<TARGET_FILE:pock-rt> "${CMAKE_BUILD_TYPE}")
set_tests_properties(test_gpu_link PROPERTIES LABELS "runtime" TIMEOUT 30 SKIP_RETURN_CODE 77)

# issue 18 (codegen half): GPU lowering check, CUDA/OpenCL emitter, NVRTC, barrier checker.
# None needs a GPU; the NVRTC test skips (77) where libnvrtc does not load.
pk_add_test(test_gpu_codegen LIBS pk_codegen LABELS codegen gpu sanitize)
pk_add_test(test_gpu_presets LIBS pk_autotune LABELS autotune gpu sanitize)
pk_add_test(test_gpu_nvrtc LIBS pk_autotune LABELS codegen gpu)
set_tests_properties(test_gpu_nvrtc PROPERTIES SKIP_RETURN_CODE 77)
pk_add_test(test_gpu_barrier LIBS pk_autotune LABELS codegen gpu sanitize)

# issue 18: generated kernels on a real device against the interpreter (gpu_device_test.h):
# every operator's preset kernels and sampled configs of every op class. test_gpu_pocl
# runs on PoCL in CI (77 without an OpenCL device); test_gpu_cuda_ops needs a GPU and NVRTC
# and prints "skipped: no GPU" (77) without one.
pk_add_test(test_gpu_pocl LIBS pk_autotune LABELS codegen gpu TIMEOUT 120)
set_tests_properties(test_gpu_pocl PROPERTIES SKIP_RETURN_CODE 77)
set_property(TEST test_gpu_pocl APPEND PROPERTY ENVIRONMENT
  "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
pk_add_test(test_gpu_cuda_ops LIBS pk_autotune LABELS codegen gpu TIMEOUT 120)
set_tests_properties(test_gpu_cuda_ops PROPERTIES SKIP_RETURN_CODE 77)

# issue 18 (artifacts): the digits MLP and CNN compiled for opencl train on PoCL to the C
# target's weights; a GPU step allocates nothing in libpockrt (--wrap, as test_gpu_opencl).
add_test(NAME test_gpu_train COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_train.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:pkw_close> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_gpu_train PROPERTIES LABELS "cli;runtime;gpu" TIMEOUT 120
  SKIP_RETURN_CODE 77 ENVIRONMENT
  "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
# An OpenCL artifact's device binary (kernels.clbin): used where the device is the one that
# built it, the source built where it differs or the driver refuses the binary.
add_test(NAME test_gpu_clbin COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_clbin.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:pkw_close>
  $<TARGET_FILE:pk_artifact_tool> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_gpu_clbin PROPERTIES LABELS "cli;runtime;gpu" TIMEOUT 120
  SKIP_RETURN_CODE 77 ENVIRONMENT
  "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
pk_add_test(test_gpu_model LIBS pk_driver pockrt_static LABELS runtime gpu TIMEOUT 120)
pk_count_allocs(test_gpu_model)
set_tests_properties(test_gpu_model PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT
  "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")

# issue 18 (tuning): the measurer on a GPU target (PoCL in CI: 77 without an OpenCL
# device), and `pock tune --target opencl` of the digits MLP into records that
# `pock compile --target opencl --db` builds and that train to the C target's weights.
pk_add_test(test_measure_gpu LIBS pk_autotune LABELS autotune gpu TIMEOUT 120)
set_tests_properties(test_measure_gpu PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT
  "POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
add_test(NAME test_gpu_tune COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_tune.sh
  $<TARGET_FILE:pock> $<TARGET_FILE:pock-rt> $<TARGET_FILE:pkw_close> ${PROJECT_SOURCE_DIR})
set_tests_properties(test_gpu_tune PROPERTIES LABELS "cli;autotune;gpu" TIMEOUT 120
  SKIP_RETURN_CODE 77 ENVIRONMENT
  "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache;POCL_CACHE_DIR=${PROJECT_BINARY_DIR}/pocl-cache")
