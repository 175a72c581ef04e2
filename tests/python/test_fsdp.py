"""quack_cpp.nn modules under FSDP2 (``torch.distributed.fsdp.fully_shard``): a small model of
RMSNorm, LayerNorm, Linear (bias), MLP (gated swiglu; relu_sq with biases), CrossEntropyLoss and
LinearCrossEntropy (fsdp_worker.Net), trained for 2 SGD steps of 2 micro-batches each
(gradient accumulation: ``set_requires_gradient_sync(False)`` then ``True``) on every rank's
slice of the batch, in float32 and with ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`` (also with ``fuse_grad_accum`` and ``reshard_after_forward=False``;
with activation checkpointing of the MLP blocks; built on the meta device, ``to_empty`` +
``reset_parameters`` on the DTensors, then the full state dict broadcast from rank 0); against
the unsharded single-process run of the same micro-batches
(fsdp_worker.reference): losses, step-0 gradients, parameters after the steps, and the state
dicts: the full one (``get_model_state_dict(full_state_dict=True)``: plain tensors) loaded by
``set_model_state_dict`` into a fresh sharded model and by ``load_state_dict`` into a plain one,
the sharded one (``module.state_dict()``: DTensors) into a fresh sharded model.

Inside FSDP2's forward and backward the modules see the unsharded parameters as plain tensors
(FSDP2 all-gathers them and swaps them in), so the custom ops never receive a DTensor.

Processes (torch.multiprocessing spawn, fsdp_worker.main):
- QUACK_TEST_DEVICE=cpu: gloo on the CPU with the CPU stand-ins of the kernels
  (cpu_stand_in.py; the worker counts their calls, so the test checks that the kernels ran and
  not torch's fallbacks), 1 and 2 processes;
- CUDA: 1 process on cuda:0 (one GPU), and 2 processes with NCCL on cuda:0 and cuda:1 when
  ``torch.cuda.device_count() >= 2`` (NVLink multicast off: NCCL_NVLS_ENABLE=0,
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 in every process).

test_dtensor_parameters_outside_fsdp2 and test_dtensor_tensor_parallel: DTensors outside FSDP2
(``distribute_module``, tensor-parallel plans, hand-placed DTensors; dtensor_worker.py) on the
ops' DTensor sharding rules (quack_cpp._dtensor), top-k and linear cross-entropy included;
test_sharding_strategies: the rules' strategy lists in one process (no process group).

Skips without torch, torch.distributed (or its FSDP2), quack_cpp, or a device.
"""

import os
import socket

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
pytest.importorskip("quack_cpp.nn")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)
pytest.importorskip("torch.distributed.fsdp")
if not hasattr(torch.distributed.fsdp, "fully_shard"):
    pytest.skip("this torch has no FSDP2 (torch.distributed.fsdp.fully_shard)",
                allow_module_level=True)

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
STAND_IN = True  # QUACK_TEST_DEVICE=cpu: the parent's reference runs on the CPU stand-ins too

f32, bf16 = torch.float32, torch.bfloat16
TOL = {f32: dict(rtol=1e-5, atol=1e-6), bf16: dict(rtol=1e-2, atol=1e-5)}

CASES = [
    dict(seed=1, mp=False),
    dict(seed=2, mp=True),
    dict(seed=3, mp=True, fuse=True, reshard=False),
    dict(seed=4, mp=True, meta=True),
    dict(seed=5, mp=True, ac=True),
]

# The ops each case must have run (CPU stand-ins): the mixed-precision cases run every module on
# the kernels; in float32 the GEMM modules (Linear, MLP, LinearCrossEntropy: bfloat16 / float16
# only) take torch's path, the norms and CrossEntropyLoss the kernels.
OPS_F32 = {"rmsnorm_fwd", "rmsnorm_bwd", "layernorm_fwd", "layernorm_bwd", "cross_entropy_fwd"}
OPS_BF16 = OPS_F32 | {"gemm", "gemm_gated", "gemm_dgated", "gemm_act", "gemm_dact",
                      "linear_cross_entropy_fwd"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _device_for(world):
    if DEVICE == "cpu":
        return "cpu"
    if torch.cuda.is_available() and torch.cuda.device_count() >= world:
        return "cuda"
    return None


def _close_scaled(a, ref, rel):
    """|a - ref| <= rel * max|ref| + 1e-6 everywhere (bfloat16 chains: a norm-wise bound)."""
    err = (a.double() - ref.double()).abs().max().item()
    bound = rel * ref.double().abs().max().item() + 1e-6
    assert err <= bound, f"max error {err:.3e} > {bound:.3e}"


def _close(a, ref, mp, what, rel=3e-2):
    if mp:
        _close_scaled(a, ref, rel)
    else:
        torch.testing.assert_close(a, ref, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


@pytest.fixture(scope="module")
def references():
    """{(case index, world): the unsharded single-process run} on this process's device."""
    import fsdp_worker as w

    dev = "cpu" if DEVICE == "cpu" else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (or QUACK_TEST_DEVICE=cpu)")
    cache = {}

    def get(i, world):
        if (i, world) not in cache:
            cache[(i, world)] = w.reference(CASES[i], world, dev)
        return cache[(i, world)]
    return get


@pytest.mark.parametrize("world", [1, 2])
def test_fsdp2_matches_unsharded(world, tmp_path, references):
    """FSDP2 on `world` processes == the unsharded run: losses of every micro-batch, step-0
    gradients (full tensors of the sharded DTensor gradients), parameters after 2 steps (from
    the full state dict), probe losses of the trained model and of the state dicts loaded
    into fresh sharded and plain models."""
    import fsdp_worker as w

    device = _device_for(world)
    if device is None:
        pytest.skip(f"needs {world} CUDA GPU(s) (or QUACK_TEST_DEVICE=cpu for gloo on the CPU)")
    import torch.multiprocessing as mp

    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                 ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)
    mp.spawn(w.main, args=(world, _free_port(), CASES, str(tmp_path), device), nprocs=world,
             join=True)
    checked = 0
    for i, case in enumerate(CASES):
        mpol = case["mp"]
        ref_losses, ref_grads, ref_params, ref_probe = references(i, world)
        outs = [torch.load(tmp_path / f"{i}_{r}.pt") for r in range(world)]
        for r, o in enumerate(outs):
            assert o["param_types"] == ["DTensor"] and o["grad_types"] == ["DTensor"]
            for n, rows in o["local_rows"].items():  # dim-0 shards (FSDP2 pads the last one)
                full = ref_params[n].shape[0]
                assert rows == min(-(-full // world), full - r * -(-full // world)), n
            for n, p in o["reset"].items():  # reset_parameters on the meta-built DTensors
                assert torch.equal(p, torch.ones_like(p) if n.endswith("weight")
                                   else torch.zeros_like(p)), n
            assert bool(o["reset"]) == case.get("meta", False)
            if device == "cpu":
                ops = OPS_BF16 if mpol else OPS_F32
                missing = ops - set(o["counts"])
                assert not missing, f"case {i}: kernels not called: {sorted(missing)}"
                if mpol:  # training forwards, recomputed ones (checkpointing), 4 probes
                    fwd = w.STEPS * w.MICRO * (2 if case.get("ac") else 1) + 4
                    assert o["counts"]["gemm_gated"] == fwd, (i, o["counts"])
            for step in range(len(ref_losses)):
                for micro in range(len(ref_losses[step])):
                    torch.testing.assert_close(o["losses"][step][micro],
                                               ref_losses[step][micro][r],
                                               **(TOL[bf16] if mpol else TOL[f32]))
            for n, g in ref_grads.items():
                assert o["grads0"][n].dtype == f32, n  # reduce_dtype / the parameter's
                _close(o["grads0"][n], g, mpol, f"grad {n}")
            assert o["full_sd_types"] == ["Tensor"] and o["sharded_sd_types"] == ["DTensor"]
            for n, p in ref_params.items():
                assert o["full_sd"][n].dtype == f32 and o["full_sd"][n].shape == p.shape, n
                _close(o["full_sd"][n], p, mpol, f"param {n}", rel=1e-2)
            tol = TOL[bf16] if mpol else TOL[f32]
            torch.testing.assert_close(o["probe"], ref_probe, **tol)
            # Loaded state dicts give the trained model's loss exactly (same values, same ops).
            assert torch.equal(o["probe_full_loaded"], o["probe"])
            assert torch.equal(o["probe_sharded_loaded"], o["probe"])
            assert o["sharded_equal"]
            torch.testing.assert_close(o["probe_plain"], ref_probe, **tol)
        # Every rank holds the same full state dict.
        for n in outs[0]["full_sd"]:
            assert all(torch.equal(o["full_sd"][n], outs[0]["full_sd"][n]) for o in outs), n
        checked += 1
    assert checked == len(CASES)


def _spawn(target, args, world=2):
    import torch.multiprocessing as mp

    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                 ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)
    mp.spawn(target, args=args, nprocs=world, join=True)


def test_dtensor_parameters_outside_fsdp2(tmp_path):
    """Kernel modules with Replicate DTensor parameters (``distribute_module``) on a Replicate
    DTensor input, outside FSDP2: the ops' DTensor sharding rules (quack_cpp._dtensor) let
    DTensor's dispatch run them."""
    import fsdp_worker as w

    device = _device_for(2)
    if device is None:
        pytest.skip("needs 2 CUDA GPUs (or QUACK_TEST_DEVICE=cpu for gloo on the CPU)")
    _spawn(w.main, (2, _free_port(), [], str(tmp_path), device, True))
    for r in range(2):
        res = torch.load(tmp_path / f"dtensor_{r}.pt")
        assert res == {"RMSNorm": "ok", "LayerNorm": "ok", "Linear": "ok", "MLP": "ok"}, res


# The ops the tensor-parallel cases must have run (CPU stand-ins): the kernels, not torch.
OPS_TP = {"gemm", "gemm_gated", "gemm_dgated", "gemm_act", "gemm_dact", "rmsnorm_fwd",
          "rmsnorm_bwd", "layernorm_fwd", "layernorm_bwd", "softmax_fwd", "softmax_bwd",
          "log_softmax_fwd", "log_softmax_bwd", "cross_entropy_fwd", "cross_entropy_bwd",
          "topk_fwd", "topk_bwd", "linear_cross_entropy_fwd", "linear_cross_entropy_bwd"}


def test_dtensor_tensor_parallel(tmp_path):
    """torch.distributed.tensor.parallel plans on 2 processes (dtensor_worker): ColwiseParallel
    and RowwiseParallel quack_cpp.nn.Linear (bias), the MLP (swiglu; relu_sq with biases) with
    fc1 column- and fc2 row-parallel, SequenceParallel RMSNorm / LayerNorm on row shards, a
    norm -> column -> row-parallel block (Megatron sequence parallelism); softmax, log_softmax
    and cross_entropy ('none', 'sum', 'mean') on row-sharded and Replicate DTensors. Each
    against the unsharded run on the same rank: outputs, input and parameter gradients (bf16:
    a norm-wise bound; fp32 functions: allclose). topk (softmax False / True / "pre") on
    row-sharded and Replicate x: values, indices, dx. linear_cross_entropy ('none', 'sum',
    'mean') with row-sharded or Replicate x and target and a Replicate weight, and
    nn.LinearCrossEntropy with Replicate DTensor parameters: loss, dx, dweight. Placements: rows
    stay sharded where the rule allows ('sum': Partial), 'mean' comes back Replicate."""
    import dtensor_worker as w

    device = _device_for(2)
    if device is None:
        pytest.skip("needs 2 CUDA GPUs (or QUACK_TEST_DEVICE=cpu for gloo on the CPU)")
    _spawn(w.main, (2, _free_port(), str(tmp_path), device))
    checked = 0
    for r in range(2):
        res = torch.load(tmp_path / f"dtensor_{r}.pt")
        assert len(res["tp"]) == 7 and len(res["functions"]) == 10
        for name, case in res["tp"].items():
            assert case["outcome"] == "ok", (name, case["outcome"])
            got, ref = case["got"], case["ref"]
            _close_scaled(got["y"], ref["y"], 2e-2)
            _close_scaled(got["dx"], ref["dx"], 2e-2)
            assert set(got["grads"]) == set(ref["grads"]) and ref["grads"], name
            for n, g in ref["grads"].items():
                _close_scaled(got["grads"][n], g, 2e-2)
            checked += 1
        for name, case in res["functions"].items():
            assert case["outcome"] == "ok", (name, case["outcome"])
            for k in ("y", "dx"):
                torch.testing.assert_close(case["got"][k], case["ref"][k], rtol=1e-5, atol=1e-5)
            # Placements: rows stay sharded where the rule allows, 'sum' becomes Partial.
            want = {"S(0)": "S(0)", "R": "R"}[name.rsplit(" ", 1)[1]]
            if "mean" in name:
                want = "R"
            elif "sum" in name and want == "S(0)":
                want = "P(sum)"
            assert case["placements"] == [want], (name, case["placements"])
            checked += 1
        assert len(res["topk"]) == 6
        for name, case in res["topk"].items():
            assert case["outcome"] == "ok", (name, case["outcome"])
            assert torch.equal(case["got"]["idx"], case["ref"]["idx"]), name
            for k in ("y", "dx"):
                torch.testing.assert_close(case["got"][k], case["ref"][k], rtol=1e-5, atol=1e-6)
            want = "S(0)" if name.endswith("S(0)") else "R"
            assert case["placements"] == [want, want], (name, case["placements"])
            checked += 1
        assert len(res["lce"]) == 7
        for name, case in res["lce"].items():
            assert case["outcome"] == "ok", (name, case["outcome"])
            torch.testing.assert_close(case["got"]["y"], case["ref"]["y"], rtol=1e-4, atol=1e-5)
            assert torch.isfinite(case["ref"]["y"]).all(), name
            for k in ("dx", "dw"):
                _close_scaled(case["got"][k], case["ref"][k], 2e-2)
            want = "R"
            if name.endswith("S(0)"):
                want = {"none": "S(0)", "sum": "P(sum)", "mean": "R"}[name.split(" ")[1]]
            assert case["placements"] == [want], (name, case["placements"])
            checked += 1
        if device == "cpu":
            missing = OPS_TP - set(res["counts"])
            assert not missing, f"kernels not called: {sorted(missing)}"
    assert checked == 2 * (17 + 6 + 7)


def test_a_refused_rule_warns_and_leaves_dtensor_importable(monkeypatch):
    """A torch whose DTensor internals reject a rule: a RuntimeWarning naming the op, the op
    recorded in _failed, and no exception into the importer of torch.distributed.tensor."""
    from quack_cpp import _dtensor

    class FakeOp:
        name = "quack_cpp::not_an_op"
        sharding = "rows"

    def refuse(op):
        raise AttributeError("no such internal")

    monkeypatch.setattr(_dtensor, "_register", refuse)
    monkeypatch.setattr(_dtensor, "_pending", [FakeOp()])
    monkeypatch.setattr(_dtensor, "_failed", {})
    with pytest.warns(RuntimeWarning, match="not_an_op"):
        _dtensor._activate()
    assert _dtensor._failed == {"quack_cpp::not_an_op": "AttributeError: no such internal"}
    assert _dtensor._pending == []


def _strategy_spec(*shape):
    """What register_sharding hands a strategy function for a tensor: its shape, Replicate
    placements, a mesh of 2."""
    from torch.distributed.tensor import Replicate

    class Mesh:
        def size(self):
            return 2

    spec = type("Spec", (), {})()
    spec.shape, spec.placements, spec.mesh = torch.Size(shape), (Replicate(),), Mesh()
    return spec


def test_sharding_strategies():
    """The rules of topk and linear cross-entropy, in one process (no process group): the
    strategy lists register_sharding gets for given argument specs, and the ops registered
    with DTensor once torch.distributed.tensor is imported."""
    import torch.distributed.tensor  # noqa: F401 (activates the pending rules)
    import quack_cpp.linear_cross_entropy_ops  # noqa: F401
    import quack_cpp.topk_ops  # noqa: F401
    from quack_cpp import _dtensor
    from torch.distributed.tensor import Partial, Replicate, Shard

    R, P, S0 = Replicate(), Partial(), Shard(0)
    Spec = _strategy_spec

    assert {"quack_cpp::topk_fwd", "quack_cpp::topk_bwd", "quack_cpp::linear_cross_entropy_fwd",
            "quack_cpp::linear_cross_entropy_bwd"} <= set(_dtensor.registered())
    assert quack_cpp.topk_ops.topk_fwd.sharding == quack_cpp.topk_ops.topk_bwd.sharding == \
        _dtensor.ROW

    # topk_fwd(x, k, largest, softmax, index_dtype, values_dtype, store_lse): rows.
    fn = _dtensor._strategy_fn(_dtensor.ROW, 3)
    got = fn(Spec(8, 16), 4, True, 2, torch.int64, f32, True)
    tail = [None] * 6
    assert got == [([R] * 3, [R] + tail), ([S0] * 3, [S0] + tail)]
    # topk_bwd(dvalues, indices, values, x, lse, N, dx_dtype, softmax).
    fn = _dtensor._strategy_fn(_dtensor.ROW, 1)
    got = fn(Spec(8, 4), Spec(8, 4), None, Spec(8, 16), Spec(8), 16, f32, 2)
    assert got == [([R], [R, R, None, R, R, None, None, None]),
                   ([S0], [S0, S0, None, S0, S0, None, None, None])]

    # linear_cross_entropy_fwd(x, weight, bias, target, ignore_index, reduction, ...).
    fwd = _dtensor._strategy_fn(_dtensor.LINEAR_CROSS_ENTROPY_FWD, 5)
    opts = (0.0, 0.0, 0.0, True, True, True, False, 0, False)
    x, w, b, t = Spec(8, 16), Spec(64, 16), Spec(64), Spec(8)
    for red, loss in (("none", S0), ("sum", P)):
        got = fwd(x, w, b, t, -100, red, *opts)
        assert got == [([R] * 5, [R, R, R, R, None, None] + [None] * 9),
                       ([loss, S0, S0, P, P], [S0, R, R, S0, None, None] + [None] * 9)], red
    got = fwd(x, w, None, t, -100, "sum", *opts)  # no bias: its slot is not a tensor
    assert got[1][1][:4] == [S0, R, None, S0]
    got = fwd(x, w, b, t, -100, "mean", *opts)  # the denominator spans every rank's rows
    assert got == [([R] * 5, [R, R, R, R] + [None] * 11)]

    # linear_cross_entropy_bwd(x, weight, bias, target, lse, dloss, ...): dloss per token
    # (T,) follows the rows, a 0-d dloss is Replicate.
    bwd = _dtensor._strategy_fn(_dtensor.LINEAR_CROSS_ENTROPY_BWD, 3)
    opts = (-100, 0.0, 0.0, 0.0, True, True, True, False)
    got = bwd(x, w, b, t, Spec(8), Spec(8), *opts)
    assert got == [([R] * 3, [R] * 6 + [None] * 8),
                   ([S0, P, P], [S0, R, R, S0, S0, S0] + [None] * 8)]
    got = bwd(x, w, b, t, Spec(8), Spec(), *opts)
    assert got[1] == ([S0, P, P], [S0, R, R, S0, S0, R] + [None] * 8)


def test_gemm_sharding_strategies_with_colvec_bias():
    """The GEMM rules with a column bias (colvec_bias (M,) / (L, M), the ops' last argument):
    it follows the rows (Shard on M with A), is Replicate with the columns, Partial in the
    reduction over K, Shard(0) in the batched strategy when per batch (Replicate when one (M,)
    vector is shared by the batches); the row bias as before."""
    import torch.distributed.tensor  # noqa: F401 (activates the pending rules)
    import quack_cpp.gemm_act_ops  # noqa: F401
    from quack_cpp import _dtensor
    from torch.distributed.tensor import Partial, Replicate, Shard

    R, P, S = Replicate(), Partial(), Shard
    Spec = _strategy_spec

    # gemm(A, B, C, alpha, beta, out_dtype, tuned, alpha_t, beta_t, bias, colvec_bias)
    fn = _dtensor._strategy_fn(_dtensor.GEMM, 1)
    scal = [None] * 6  # alpha, beta, out_dtype, tuned, alpha_t, beta_t

    def gin(a, b, bias, col):
        return [a, b, None] + scal + [bias, col]

    got = fn(Spec(8, 16), Spec(16, 12), None, 1.0, 0.0, torch.bfloat16, False, None, None,
             Spec(12), Spec(8))
    assert got == [([R], gin(R, R, R, R)), ([S(0)], gin(S(0), R, R, S(0))),
                   ([S(1)], gin(R, S(1), S(0), R)), ([P], gin(S(1), S(0), P, P))]
    # With the trailing dynamic_scheduler (the registrar passes every argument): one more
    # placement, None (not a tensor), and the same strategies.
    got12 = fn(Spec(8, 16), Spec(16, 12), None, 1.0, 0.0, torch.bfloat16, False, None, None,
               Spec(12), Spec(8), True)
    assert got12 == [(o, i + [None]) for o, i in got]
    got = fn(Spec(3, 8, 16), Spec(3, 16, 12), None, 1.0, 0.0, torch.bfloat16, False, None, None,
             Spec(12), Spec(3, 8))
    assert got == [([R], gin(R, R, R, R)), ([S(1)], gin(S(1), R, R, S(1))),
                   ([S(2)], gin(R, S(2), S(0), R)), ([P], gin(S(2), S(1), P, P)),
                   ([S(0)], gin(S(0), S(0), R, S(0)))]
    got = fn(Spec(3, 8, 16), Spec(3, 16, 12), None, 1.0, 0.0, torch.bfloat16, False, None, None,
             None, Spec(8))  # a shared (M,) vector, no row bias
    assert got[1] == ([S(1)], gin(S(1), R, None, S(0)))
    assert got[-1] == ([S(0)], gin(S(0), S(0), None, R))

    # gemm_act(A, B, C, bias, activation, alpha, beta, store_preact, out_dtype, postact_dtype,
    # tuned, colvec_bias) and gemm_gated (concat_layout before tuned): 7 or 8 options between
    # bias and colvec_bias, never tensors.
    def ain(a, b, c, bias, col, n_opts=7):
        return [a, b, c, bias] + [None] * n_opts + [col]

    fn = _dtensor._strategy_fn(_dtensor.GEMM_ACT, 2)
    got = fn(Spec(8, 16), Spec(16, 12), Spec(8, 12), None, "relu", 1.0, 1.0, True,
             torch.bfloat16, torch.bfloat16, False, Spec(8))
    assert got == [([R] * 2, ain(R, R, R, None, R)), ([S(0)] * 2, ain(S(0), R, S(0), None, S(0))),
                   ([S(1)] * 2, ain(R, S(1), S(1), None, R))]
    got = fn(Spec(3, 8, 16), Spec(3, 16, 12), None, Spec(12), "relu", 1.0, 0.0, True,
             torch.bfloat16, torch.bfloat16, False, Spec(3, 8))
    assert got[-1] == ([S(0)] * 2, ain(S(0), S(0), None, R, S(0)))
    assert got[1] == ([S(1)] * 2, ain(S(1), R, None, R, S(1)))
    fn = _dtensor._strategy_fn(_dtensor.GEMM_GATED, 2)
    got = fn(Spec(8, 16), Spec(16, 12), None, Spec(12), "swiglu", 1.0, 0.0, True,
             torch.bfloat16, torch.bfloat16, False, False, Spec(8))
    assert got == [([R] * 2, ain(R, R, None, R, R, 8)),
                   ([S(0)] * 2, ain(S(0), R, None, R, S(0), 8)),
                   ([S(1)] * 2, ain(R, S(1), None, S(0), R, 8))]
