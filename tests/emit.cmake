# The C backend's loop kinds (vectorized, parallel, unrolled) and emitted-source shape.
pk_add_test(test_emit_c LIBS pk_codegen LABELS codegen sanitize)
# The prelude's vector exp and sigmoid against libm (ulp bounds, special values).
pk_add_test(test_vexp LABELS codegen sanitize)
target_include_directories(test_vexp PRIVATE ${PROJECT_SOURCE_DIR}/codegen ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_vexp PRIVATE -Wno-psabi) # 16-lane values without AVX-512: emulated
