# Run AI, call 4 (cold; device build with the A/B tiles and Python; carry [".peers", ".whl",
# ".data"]), on branch `ai4` (main + the helper branches named below):
#   BUDGET=590 TEST_TMO=80 TESTS='*Topk* All/LayerNormConfigs.MatchesReference/staged_v4*:LayerNormPlan.*' PYFILES='test_fastpath_cpu test_gemm_plumbing_cpu test_topk'
#   ITEMS=scripts/device/ai4_items.sh bash scripts/device/call_focus.sh
# docs/status.md "Open threads" says why each item is here.
QB=build/d/bench/quack-bench
# Issue 19's last miss, top-k fp32 (65536, 1024, 8) (0.0886 ms kernel-only, QuACK 0.0781; 0.86 x
# by the acceptance method, AI2): branch `topk-f32`: the default fit instance at 96 registers
# (was 116: 5 CTAs/SM; predicted ~0.085), the staged instances (cp.async into shared memory:
# e64 77 registers, 6 CTAs/SM, predicted 0.076-0.082; e128 0.074-0.085), all forced here.
run topk_f32 60 bash -c "$QB topk --dtype fp32 --shapes 65536x1024x8,65536x2048x8,65536x1024x16 --config all; $QB topk --dtype fp32 --shapes 65536x1024x8 --path bitonic-stage"
# Issue 16's 8192 x 8192 x 128 (0.79 x cuBLAS; more D buffers no faster, AI2): branch `gemm-k128`'s
# A/B tiles, D stored by the threads (t: no TMA stores; predicted 0.050-0.056 ms if the SM's TMA
# store path is the limit, else unchanged 0.063-0.066), and no cluster (c1: unchanged); then the
# tile order and 256x128c1x2 on the rule's tile. cuBLAS 0.0495 / 0.0668 / 0.1830.
k128() { S=8192x8192x128,8192x8192x256,16384x16384x128
  for t in 128x128pp 128x128ppt 128x256e64t 128x128ppc1 256x128c1x2; do echo "== tile $t"; QUACK_GEMM_TILE=$t $QB gemm --layout rr --shapes $S --ms 60; done
  for r in m1 n8 m8s; do echo "== 128x128pp raster $r"; QUACK_GEMM_RASTER=$r QUACK_GEMM_TILE=128x128pp $QB gemm --layout rr --shapes $S --ms 60; done; }
run k128 90 bash -c "QB=$QB; $(declare -f k128); k128"
# LayerNorm bwd (16384 x 4096: 115.7 against RMSNorm bwd's 102.5 us, AH3 ncu; 0.71-0.84 x copy by
# the acceptance method, AF1): branch `ln-bwd2`'s staged entries, staged-v4-ra (mean and rstd one
# row block ahead) and staged-v4-s3 (three stages), forced, beside the plan's staged-v4.
run ln_bwd 60 $QB layernorm --wdtype x --bias 1 --dir bwd --shapes 16384x4096,16384x32768,16384x131072,8192x262144 --config all
# gemm_dgated at the demo's fc2 dgrad (1.49 x plain under ncu, AI2: its time is near mainloop +
# epilogue traffic, its reads 320 MB above the minimum, L2 hit 75 against 89 %): the tile order's
# band (QUACK_GEMM_RASTER; default m8) beside plain at the same orders. If the preact stream evicts
# the operands between their uses, a band that reuses them sooner moves dgated and not plain.
raster() { for r in "" m2 m4 m16 n8 h8; do echo "== raster ${r:-default}"
  QUACK_GEMM_RASTER=$r python3 bench/bench_gemm_fused.py --ops dgated --acts swiglu --shapes 16384x5632x2048 --methods burst --burst-rounds 2 --impls ours --plain-tile 128x128pp --out /tmp/r.jsonl 2>&1 | grep -E "dgated|plain" | tail -3; done; }
run dgated_raster 120 bash -c "$(declare -f raster); raster"
# The in-process gap: quack-bench's own loop inside Python, with torch absent, initialised, and
# after the acceptance call (softmax fwd 16384 x 65536: 4.19-4.21 TB/s under quack-bench, 3.95-4.00
# by do_bench in AE2 / AF). Same as the executable in every mode -> the method; slow once torch
# is in -> the process.
gap() { ninja -C build/d bench/libquack-bench-lib.so > /dev/null || return 1
  L=build/d/bench/libquack-bench-lib.so; A="softmax --shapes 16384x65536 --dir fwd --ms 200"
  echo "== executable"; $QB $A
  for m in none init acceptance; do echo "== in python, torch $m"; python3 scripts/diag_bench_in_torch.py --lib $L --torch $m -- $A; done
  echo "== executable again"; $QB $A; }
run gap 150 bash -c "QB=$QB; $(declare -f gap); gap"
