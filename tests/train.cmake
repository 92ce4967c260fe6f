# train.cmake — training equivalence with PyTorch: Pock replays the batches recorded by
# scripts/gen_train_fixtures.py (tests/fixtures/train) and must reach PyTorch's weights.
# One executable, registered once per model (by hand rather than with pk_add_test, which
# registers one test per source): each compiles ten artifacts, ~25 s cold on one core.
add_executable(test_train_equiv test_train_equiv.c)
target_link_libraries(test_train_equiv PRIVATE pk_driver pockrt_static)
target_compile_definitions(test_train_equiv PRIVATE PK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
foreach(model mlp cnn resnet attn bnnet normnet optim tokens mobilenet_v2 resnet18 bert llama)
  add_test(NAME test_train_equiv_${model} COMMAND test_train_equiv --only ${model}_)
  set_tests_properties(test_train_equiv_${model} PROPERTIES LABELS "train;driver" TIMEOUT 300
    ENVIRONMENT "POCK_CACHE_DIR=${PROJECT_BINARY_DIR}/kernel-cache")
endforeach()
