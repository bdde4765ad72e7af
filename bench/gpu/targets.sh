# Sourced by the bench/gpu scripts: the build targets each GPU part needs (no more, so the
# build on the GPU machine stays short).
PRECISION_TARGETS=(mixt_cli precision_fp32 precision_tf32 precision_amp_fp16 precision_amp_bf16 precision_custom_scaler
                   optimizer_sgd optimizer_adamw model_simple_cnn dataset_fashion_mnist
                   test_autocast_parity test_grad_scaler_parity test_sync_free_step test_precision_policies)
RESNET50_TARGETS=(mixt_cli precision_fp32 precision_tf32 precision_amp_fp16 precision_amp_bf16 optimizer_sgd
                  scheduler_cosine model_resnet dataset_synthetic)
