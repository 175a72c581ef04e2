# Run AR3 (cold, library prebuilt as AR2): where the relu² MLP block's time goes. AR2 (H100):
# fwd+bwd ours 18.48 ms against torch.compile 16.13 (0.873 x), while our act / dact GEMMs read
# faster than compile's at 16384 x 14336 x 4096 (AR1: 2.808 / 2.820 against 2.956 / 3.245).
# Predicted: one or two of our kernels (the wgrad GEMMs, mm: 128x256 alone; or a copy) hold the
# 2.3 ms; the act / dact kernels within 5 % of plain gemm.
#   PREBUILT_LIB=1 AB_INSTANCES=OFF BUDGET=400 ITEMS=scripts/device/ar3_items.sh bash scripts/device/call_bench.sh
run mlp_prof_relu_sq 240 python3 scripts/mlp_profile.py relu_sq ours,compile
run mlp_prof_swiglu 120 python3 scripts/mlp_profile.py swiglu ours,torch
