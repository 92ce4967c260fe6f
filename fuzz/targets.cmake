# targets.cmake — the fuzz targets, one source of truth for both builds that use them:
# fuzz/CMakeLists.txt links each with libFuzzer (-DPOCK_FUZZ=ON), tests/harden.cmake with
# replay_main.c to replay its corpus (fuzz/corpus/NAME) in every build.
# Per target: its sources (in fuzz/), the libraries it links, the symbols the link wraps
# (a wrap makes a path the target must never take trap or refuse: no_load.c, no_read.c).
set(POCK_FUZZ_TARGETS artifact graph sparse pkw csv npy jsonl onnx remote)
set(POCK_FUZZ_artifact_SOURCES fuzz_artifact.c no_load.c)
set(POCK_FUZZ_artifact_LIBS pockrt_static)
set(POCK_FUZZ_artifact_WRAP pkrt_module_load_memory dlopen)
set(POCK_FUZZ_graph_SOURCES fuzz_graph.c no_read.c)
set(POCK_FUZZ_graph_LIBS pk_frontends)
set(POCK_FUZZ_graph_WRAP pkrt_weights_read)
set(POCK_FUZZ_sparse_SOURCES fuzz_sparse.c)
set(POCK_FUZZ_sparse_LIBS pk_frontends)
set(POCK_FUZZ_pkw_SOURCES fuzz_pkw.c)
set(POCK_FUZZ_pkw_LIBS pockrt_static)
set(POCK_FUZZ_csv_SOURCES fuzz_csv.c)
set(POCK_FUZZ_csv_LIBS pockrt_static)
set(POCK_FUZZ_npy_SOURCES fuzz_npy.c)
set(POCK_FUZZ_npy_LIBS pockrt_static)
set(POCK_FUZZ_jsonl_SOURCES fuzz_jsonl.c)
set(POCK_FUZZ_jsonl_LIBS pk_autotune)
set(POCK_FUZZ_onnx_SOURCES fuzz_onnx.c)
set(POCK_FUZZ_onnx_LIBS pk_frontends)
set(POCK_FUZZ_remote_SOURCES fuzz_remote.c no_load.c) # issue 19: pock-rt-serve's requests
set(POCK_FUZZ_remote_LIBS pockrt_static)
set(POCK_FUZZ_remote_WRAP pkrt_module_load_memory dlopen)

# pock_fuzz_executable(EXE NAME [more sources...]): EXE built from target NAME's sources.
function(pock_fuzz_executable exe name)
  set(srcs)
  foreach(s ${POCK_FUZZ_${name}_SOURCES})
    list(APPEND srcs ${PROJECT_SOURCE_DIR}/fuzz/${s})
  endforeach()
  add_executable(${exe} ${srcs} ${ARGN})
  target_link_libraries(${exe} PRIVATE ${POCK_FUZZ_${name}_LIBS})
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/fuzz)
  foreach(sym ${POCK_FUZZ_${name}_WRAP})
    target_link_options(${exe} PRIVATE -Wl,--wrap=${sym})
  endforeach()
endfunction()
