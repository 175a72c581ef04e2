# Run AR5 (warm): the relu² block's timeline (AR4: back-to-back steps 17.01 ms of wall against
# 15.41 of kernels, host enqueue 1.45 ms per step, no synchronize, no memset; compile 16.47 /
# 16.21). Predicted: a GPU gap before one kernel of ours' step (the backward's first, or the one
# after the dact GEMM), its launch late against the previous kernel's end.
run mlp_tl_relu_sq 200 python3 scripts/mlp_profile.py relu_sq ours
run mlp_tl_swiglu 100 python3 scripts/mlp_profile.py swiglu ours
