# Run AR4 (warm after AR3): AR3 read the relu² block's kernels at 15.41 ms per step (compile's
# 16.21) where the acceptance method reads 18.48 (compile 16.13): ~3 ms of the step is not
# kernel time. Predicted: a runtime call that waits (a synchronize, a blocking copy, cudaMalloc)
# in ours' relu² step, absent from SwiGLU's (kernels 24.99 against 25.16 ms by the method).
run mlp_api_relu_sq 200 python3 scripts/mlp_profile.py relu_sq ours,compile
run mlp_api_swiglu 100 python3 scripts/mlp_profile.py swiglu ours
