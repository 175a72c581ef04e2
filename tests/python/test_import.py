"""The package and the extension without torch and without a GPU (these run in CI when the
extension is built and importable; otherwise they skip)."""

import pytest

quack_cpp = pytest.importorskip("quack_cpp")
_C = quack_cpp._C


def test_version():
    assert quack_cpp.__version__ == "0.1.0"
    assert _C.version() == quack_cpp.__version__


def test_surface_and_docstrings():
    for name in ("rmsnorm_fwd", "rmsnorm_bwd_workspace_size", "rmsnorm_bwd", "version"):
        fn = getattr(_C, name)
        assert fn.__doc__ and len(fn.__doc__) > 40, name
    assert "rstd = 1 / sqrt(mean_j(h_j^2) + eps)" in _C.rmsnorm_fwd.__doc__
    assert quack_cpp.__doc__


def _t(shape, dtype=0, device=0, ptr=4096, strides=None):
    if strides is None:
        strides = (shape[1], 1) if len(shape) == 2 else (1,)
    return (ptr, dtype, tuple(shape), tuple(strides), device)


# Host-side validation throws before any CUDA call, so these run without a GPU.
@pytest.mark.parametrize("kwargs,match", [
    (dict(weight=_t((4095,))), r"rmsnorm_fwd: weight has shape \(4095,\) float32, expected \(4096,\)"),
    (dict(x=_t((2, 8, 4096), strides=(8 * 4096, 4096, 1))), r"x has 3 dimensions"),
    (dict(x=_t((8, 4096), dtype=7)), r"x has dtype code 7"),
    (dict(x=_t((8, 4096), dtype=3)), r"x has dtype int32"),
    (dict(x=_t((8, 4096), device=-1)), r"x is in host memory"),
    (dict(out=_t((8, 4095))), r"out has shape"),
    (dict(residual=_t((8, 4096), device=1)), r"residual is on cuda:1, expected cuda:0"),
    (dict(out=_t((8, 4096), strides=(0, 1))), r"out has overlapping elements"),
    (dict(rstd=_t((8,), dtype=2)), r"rstd has dtype bfloat16"),
    (dict(eps=-1.0), r"eps"),
    (dict(weight_offset=float("inf")), r"^rmsnorm_fwd: weight_offset is inf, expected a finite value"),
    (dict(x=(4096, 0, (8, 4096), (4096,), 0)), r"x has 2 sizes but 1 strides"),
])
def test_fwd_validation_is_value_error(kwargs, match):
    args = dict(x=_t((8, 4096)), weight=None, bias=None, residual=None, out=_t((8, 4096)),
                residual_out=None, rstd=None, eps=1e-6, stream=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        _C.rmsnorm_fwd(**args)


def test_bwd_validation_is_value_error():
    # The outputs (dx, dweight) apart from the inputs (x doubles as dout: inputs may share).
    x, dx, dw = _t((8, 4096)), _t((8, 4096), ptr=1 << 20), _t((4096,), ptr=2 << 20)
    with pytest.raises(ValueError, match="dweight is given but weight is absent"):
        _C.rmsnorm_bwd_workspace_size(x, None, x, _t((8,)), None, dx, None, dw, None)
    with pytest.raises(ValueError, match="rstd has shape"):
        _C.rmsnorm_bwd(x, None, x, _t((7,)), None, dx, None, None, None, 0, 0, 0)
    with pytest.raises(ValueError, match="dout has shape"):
        _C.rmsnorm_bwd(x, None, _t((8, 8)), _t((8,)), None, dx, None, None, None)
    with pytest.raises(ValueError, match="weight_offset is nan"):
        _C.rmsnorm_bwd(x, None, x, _t((8,)), None, dx, None, None, None, weight_offset=float("nan"))
    with pytest.raises(ValueError, match="rmsnorm_bwd: dx overlaps x in memory"):
        _C.rmsnorm_bwd(x, None, x, _t((8,)), None, x, None, None, None)


def test_empty_rows_launch_nothing():
    # M = 0: validation only, no CUDA call (fine with or without a GPU; no memory is touched).
    x = _t((0, 4096))
    _C.rmsnorm_fwd(x, None, None, None, x, None, _t((0,)), 1e-6, 0)


def test_cuda_errors_are_runtime_errors():
    """Without a usable GPU, a valid call raises RuntimeError (CudaError) with CUDA's text; it
    never crashes. With a GPU the occupancy query just answers (no memory is touched)."""
    x = _t((8, 4096))
    try:
        ws = _C.rmsnorm_bwd_workspace_size(x, _t((4096,)), x, _t((8,)), None,
                                           _t((8, 4096), ptr=1 << 20), None,
                                           _t((4096,), ptr=2 << 20), None)
    except RuntimeError as e:
        assert "cuda" in str(e).lower()
        # No device: the forward fails the same clean way (at its device guard, before any
        # launch, so the dummy pointers are never dereferenced).
        with pytest.raises(RuntimeError, match="cuda"):
            _C.rmsnorm_fwd(x, None, None, None, x, None, None, 1e-6, 0)
    else:
        assert ws > 0 and ws % 16 == 0


# --------------------------------------------------------------------------------------------
# GEMM binding (validation is host-only: no CUDA call, so these run without a GPU)
# --------------------------------------------------------------------------------------------


def _m(rows, cols, strides=None, dtype=2, device=0, ptr=4096):
    """A bf16 (rows, cols) tuple; row-major unless strides are given."""
    return (ptr, dtype, (rows, cols), strides or (cols, 1), device)


def _gemm_ok(**kw):
    # Operands 1 MiB apart: d must not overlap a, b or a bias (the C++ checks it).
    mb = 1 << 20
    args = dict(a=_m(128, 64, ptr=mb), b=_m(64, 256, (1, 64), ptr=2 * mb), c=None,
                d=_m(128, 256, ptr=3 * mb), alpha=1.0, beta=0.0)
    args.update(kw)
    return args


def test_gemm_surface():
    for name in ("gemm", "gemm_can_implement"):
        doc = getattr(_C, name).__doc__
        assert "D[l] = alpha * (A[l] @ B[l]) + beta * C[l]" in doc, name
    assert _C.gemm_can_implement(**_gemm_ok()) is None


@pytest.mark.parametrize("kwargs,match", [
    (dict(b=_m(65, 256, (1, 65))), r"^gemm: b has shape \(65, 256\) bfloat16, expected \(K, N\) = \(64, \*\)"),
    (dict(d=_m(128, 256, dtype=1)), r"^gemm: d has dtype float16, expected bfloat16 or float32"),
    (dict(a=_m(128, 64, device=-1)), r"^gemm: a is in host memory, expected a CUDA tensor"),
    (dict(b=_m(64, 256, (1, 64), device=1)), r"^gemm: b is on cuda:1, expected cuda:0"),
    (dict(beta=0.5), r"^gemm: beta is 0.500000 but c is absent"),
    (dict(c=_m(128, 256, dtype=1, ptr=4 << 20), beta=1.0), r"^gemm: c has dtype float16, expected bfloat16"),
    (dict(d=_m(128, 256, ptr=(1 << 20) + 64)), r"^gemm: d overlaps a in memory"),
    (dict(a=_m(128, 64, ptr=4097)), r"^gemm: a has a base address that is not 2-byte aligned"),
    (dict(d=_m(128, 256, (0, 1))), r"^gemm: d has leading stride 0 < 256 contiguous elements"),
    (dict(a=(4096, 2, (128, 64), (64,), 0)), r"^gemm: a has 2 sizes but 1 strides"),
])
def test_gemm_validation_is_value_error(kwargs, match):
    # Both entry points validate the same way, before any CUDA call.
    with pytest.raises(ValueError, match=match):
        _C.gemm_can_implement(**_gemm_ok(**kwargs))
    with pytest.raises(ValueError, match=match):
        _C.gemm(**_gemm_ok(**kwargs), stream=0)


def test_gemm_workspace_size():
    # K = 63 (not a multiple of 8): a and b are copied into padded rows (issue 16); the size
    # query validates like gemm_can_implement and makes no CUDA call.
    assert _C.gemm_workspace_size(**_gemm_ok()) == 0
    assert _C.gemm_workspace_size(**_gemm_ok(a=_m(128, 63), b=_m(63, 256, (1, 63)))) == 128 * 64 * 2 + 256 * 64 * 2
    assert _C.gemm_can_implement(**_gemm_ok(a=_m(128, 63), b=_m(63, 256, (1, 63)))) is None
    with pytest.raises(ValueError, match=r"^gemm: b has shape"):
        _C.gemm_workspace_size(**_gemm_ok(b=_m(65, 256, (1, 65))))


def test_gemm_act_workspace_size():
    # gemm_act / gemm_dact accept any alignment as gemm: K = 63 copies a and b (gemm_act), a
    # row-major b of N = 250 is copied for gemm_dact; the outputs need no workspace.
    mb = 1 << 20
    act = dict(a=_m(128, 63, ptr=mb), b=_m(63, 256, (1, 63), ptr=2 * mb), c=None,
               preact=_m(128, 256, ptr=3 * mb), postact=_m(128, 256, ptr=4 * mb), activation="gelu_tanh_approx")
    assert _C.gemm_act_workspace_size(**act) == 128 * 64 * 2 + 256 * 64 * 2
    assert _C.gemm_act_can_implement(**act) is None
    act.update(a=_m(128, 64, ptr=mb), b=_m(64, 256, (1, 64), ptr=2 * mb))
    assert _C.gemm_act_workspace_size(**act) == 0
    dact = dict(a=_m(128, 64, ptr=mb), b=_m(64, 250, ptr=2 * mb), preact=_m(128, 250, ptr=3 * mb),
                dpreact=_m(128, 250, ptr=4 * mb), postact=None, activation="relu")
    assert _C.gemm_dact_workspace_size(**dact) == (64 * 256 * 2 + 255) // 256 * 256
    with pytest.raises(ValueError, match=r"^gemm_dact: preact has shape"):
        _C.gemm_dact_workspace_size(**dict(dact, preact=_m(127, 250, ptr=3 * mb)))


def test_gemm_empty_launches_nothing():
    # M = 0 / N = 0: validation only, no CUDA call (fine with or without a GPU).
    _C.gemm(_m(0, 64), _m(64, 256, (1, 64)), None, _m(0, 256), 1.0, 0.0, 0)
    _C.gemm(_m(128, 64), _m(64, 0, (1, 64)), None, _m(128, 0, (8, 1)), 1.0, 0.0, 0)


def test_gemm_bias_and_gated_surface():
    vec = lambda n, dtype=0: (8192, dtype, (n,), (1,), 0)  # noqa: E731
    assert _C.gemm_can_implement(**_gemm_ok(), bias_row=vec(256)) is None
    with pytest.raises(ValueError, match=r"^gemm: bias.row has shape \(255,\) float32"):
        _C.gemm_can_implement(**_gemm_ok(), bias_row=vec(255))
    gated = dict(a=_m(128, 64), b=_m(64, 256, (1, 64)), c=None, preact=_m(128, 256, ptr=1 << 20),
                 postact=_m(128, 128, ptr=2 << 20), activation="swiglu")
    assert _C.gemm_gated_can_implement(**gated) is None
    assert _C.gemm_gated_can_implement(**gated, concat_layout=True, bias_row=vec(256)) is None
    with pytest.raises(ValueError, match=r"^gemm_gated: activation is relu, expected a gated"):
        _C.gemm_gated_can_implement(**dict(gated, activation="relu"))
    with pytest.raises(ValueError, match=r"^gemm_gated: activation is 'swish'"):
        _C.gemm_gated_can_implement(**dict(gated, activation="swish"))
    with pytest.raises(ValueError, match=r"^gemm_gated: postact has shape \(128, 256\)"):
        _C.gemm_gated_can_implement(**dict(gated, postact=_m(128, 256, ptr=2 << 20)))
    dgated = dict(a=_m(128, 64), b=_m(64, 128), preact=_m(128, 256),
                  dpreact=_m(128, 256, ptr=1 << 20), postact=_m(128, 128, ptr=2 << 20),
                  activation="geglu")
    assert _C.gemm_dgated_can_implement(**dgated) is None
    with pytest.raises(ValueError, match=r"^gemm_dgated: preact has shape \(128, 128\)"):
        _C.gemm_dgated_can_implement(**dict(dgated, preact=_m(128, 128)))
    with pytest.raises(ValueError, match=r"^gemm_act: activation is swiglu \(gated"):
        _C.gemm_act_can_implement(_m(128, 64), _m(64, 256, (1, 64)), None, None,
                                  _m(128, 256, ptr=2 << 20), "swiglu")
    # Any alignment as gemm: K = 63 copies a and b; H = 125 copies gemm_dgated's row-major b;
    # the packed preact / dpreact need 4-byte pairs.
    mb = 1 << 20
    gated_u = dict(gated, a=_m(128, 63), b=_m(63, 256, (1, 63)))
    assert _C.gemm_gated_workspace_size(**gated) == 0
    assert _C.gemm_gated_workspace_size(**gated_u) == 128 * 64 * 2 + 256 * 64 * 2
    assert _C.gemm_gated_workspace_size(**gated_u, concat_layout=True, bias_row=vec(256)) == \
        128 * 64 * 2 + 256 * 64 * 2
    dgated_u = dict(a=_m(128, 64), b=_m(64, 125), preact=_m(128, 250),
                    dpreact=_m(128, 250, ptr=mb), postact=_m(128, 125, ptr=2 * mb),
                    activation="swiglu")
    assert _C.gemm_dgated_workspace_size(**dgated) == 0
    assert _C.gemm_dgated_workspace_size(**dgated_u) == 64 * 128 * 2
    assert _C.gemm_dgated_can_implement(**dgated_u) is None
    with pytest.raises(ValueError, match=r"^gemm_dgated: preact .* 4-byte \(gate, up\) pairs"):
        _C.gemm_dgated_can_implement(**dict(dgated_u, preact=_m(128, 250, ptr=4098)))
    # Empty problems: validation only.
    _C.gemm_gated(_m(0, 64), _m(64, 256, (1, 64)), None, None, _m(0, 128, ptr=2 << 20), "glu",
                  stream=0)
    _C.gemm_dgated(_m(0, 64), _m(64, 128), _m(0, 256), _m(0, 256, ptr=1 << 20), None, "reglu",
                   stream=0)


# --------------------------------------------------------------------------------------------
# LayerNorm binding (validation is host-only: these run without a GPU)
# --------------------------------------------------------------------------------------------


def test_layernorm_surface():
    for name in ("layernorm_fwd", "layernorm_bwd", "layernorm_bwd_workspace_size"):
        doc = getattr(_C, name).__doc__
        assert doc and "weight_offset" in doc, name
    assert "rstd = 1 / sqrt(mean_j (h_j - mean)^2 + eps)" in _C.layernorm_fwd.__doc__


@pytest.mark.parametrize("kwargs,match", [
    (dict(weight=_t((4095,))), r"^layernorm_fwd: weight has shape \(4095,\) float32, expected \(4096,\)"),
    (dict(bias=_t((4096,), dtype=3)), r"^layernorm_fwd: bias has dtype int32"),
    (dict(mean=_t((8,), dtype=2)), r"^layernorm_fwd: mean has dtype bfloat16"),
    (dict(rstd=_t((9,))), r"^layernorm_fwd: rstd has shape \(9,\)"),
    (dict(residual=_t((8, 4096), device=1)), r"^layernorm_fwd: residual is on cuda:1, expected cuda:0"),
    (dict(out=_t((8, 4096), strides=(0, 1))), r"^layernorm_fwd: output out has overlapping elements"),
    (dict(eps=-1.0), r"^layernorm_fwd: eps"),
    (dict(weight_offset=float("nan")), r"^layernorm_fwd: weight_offset is nan, expected a finite value"),
    (dict(x=_t((8, 0)), out=_t((8, 0)), rstd=_t((7,))), r"^layernorm_fwd: rstd has shape \(7,\)"),
])
def test_layernorm_fwd_validation_is_value_error(kwargs, match):
    args = dict(x=_t((8, 4096)), weight=None, bias=None, residual=None, out=_t((8, 4096)),
                residual_out=None, mean=None, rstd=None, eps=1e-5, weight_offset=0.0, stream=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        _C.layernorm_fwd(**args)


def test_layernorm_bwd_validation_is_value_error():
    x = _t((8, 4096))
    s = _t((8,))
    with pytest.raises(ValueError, match="dweight is given but weight is absent"):
        _C.layernorm_bwd_workspace_size(x, None, x, s, s, None, x, None, _t((4096,)), None)
    with pytest.raises(ValueError, match="^layernorm_bwd: mean has shape"):
        _C.layernorm_bwd(x, None, x, _t((7,)), s, None, x, None, None, None)
    with pytest.raises(ValueError, match="^layernorm_bwd: rstd is absent"):
        _C.layernorm_bwd(x, None, x, s, None, None, x, None, None, None)


def test_layernorm_empty_rows_launch_nothing():
    # M = 0 without dweight/dbias: validation only, no CUDA call.
    x = _t((0, 4096))
    _C.layernorm_fwd(x, None, None, None, x, None, _t((0,)), _t((0,)), 1e-5, 0.0, 0)
    assert _C.layernorm_bwd_workspace_size(x, None, x, _t((0,)), _t((0,)), None, x, None,
                                           None, None) == 0
    _C.layernorm_bwd(x, None, x, _t((0,)), _t((0,)), None, x, None, None, None)


def test_linear_cross_entropy_surface():
    for name in ("linear_cross_entropy_chunk_size", "linear_cross_entropy_fwd_workspace_size",
                 "linear_cross_entropy_fwd", "linear_cross_entropy_bwd_workspace_size",
                 "linear_cross_entropy_bwd", "linear_cross_entropy_scale_grad"):
        assert getattr(_C, name).__doc__, name
    # The chunk rule at the main shape: 4 chunks of 4096 tokens; low memory 2048.
    assert _C.linear_cross_entropy_chunk_size(16384, 4096, 128256) == 4096
    assert _C.linear_cross_entropy_chunk_size(16384, 4096, 128256, low_memory=True) == 2048
    T, D, V = 16, 64, 100
    x, w = _t((T, D), dtype=2), _t((V, D), dtype=2)
    t, loss = _t((T,), dtype=4), _t((1,))
    n = _C.linear_cross_entropy_fwd_workspace_size(x, w, None, t, loss, dx=_t((T, D), dtype=2),
                                                   dweight=_t((V, D), dtype=2))
    assert n > T * 100 * 2  # at least one logits chunk
    with pytest.raises(ValueError, match="linear_cross_entropy_fwd: x has dtype float32, "
                                         "expected bfloat16 or float16"):
        _C.linear_cross_entropy_fwd_workspace_size(_t((T, D), dtype=0), w, None, t, loss)
    with pytest.raises(ValueError, match="weight has dtype bfloat16, expected float16"):
        _C.linear_cross_entropy_fwd_workspace_size(_t((T, D), dtype=1), w, None, t, loss)
    assert _C.linear_cross_entropy_fwd_workspace_size(
        _t((T, D), dtype=1), _t((V, D), dtype=1), None, t, loss) > 0  # float16 x and weight
    with pytest.raises(ValueError, match="row stride 68"):
        _C.linear_cross_entropy_fwd(_t((T, D), dtype=2, strides=(68, 1)), w, None, t, loss)
    with pytest.raises(ValueError, match="reduction is 'avg'"):
        _C.linear_cross_entropy_fwd(x, w, None, t, loss, reduction="avg")
    with pytest.raises(ValueError, match="linear_cross_entropy_bwd: dloss has shape"):
        _C.linear_cross_entropy_bwd(x, w, None, t, _t((T,)), _t((T - 1,)))


def test_topk_no_workspace_bound():
    """topk_ops skips the workspace-size call for k ≤ _C.topk_max_k_without_workspace (read once
    at import): at that k the C++ size is 0 (the plan is host-only: no CUDA call)."""
    k = _C.topk_max_k_without_workspace
    assert isinstance(k, int) and k > 0
    x = _t((4, 2 * k), ptr=1 << 20)
    values, indices = _t((4, k), ptr=1 << 24), _t((4, k), dtype=4, ptr=1 << 25)
    assert _C.topk_fwd_workspace_size(x, values, indices) == 0
