"""The fused-epilogue GEMMs and the layers on them, on the GPU against a float64 reference and
torch in the same dtype (tolerance rule of shared/cases/handed.md):

- quack_cpp.gemm_act / gemm_dact / gemm_gated / gemm_dgated for every activation, bias, C,
  store_preact / store_postact off, batches, the concat layout, odd N; C09 (NaN / Inf in C);
- quack_cpp.gemm(bias=...) forward and backward ((N,) and per-batch (L, N) bias),
  nn.Linear(bias=True) forward and backward (the bias's gradient);
- the column bias colvec_bias ((M,) / (L, M) added to every column) of gemm (forward and
  backward), gemm_act and gemm_gated: alone and with the row bias, fp32 and the output dtype,
  batched, the concat layout, K = 0, bad input, opcheck, torch.compile;
- nn.LinearAct + nn.DActLinear, nn.MLP (plain and gated, biases, concat_layout,
  fuse_grad_accum) forward and backward against a torch block of two Linears with the same state
  dict, MLP.from_llama against a Llama-style block, the torch fallback, torch.compile(fullgraph)
  forward and backward, CUDA-graph capture.

Skips without torch, quack_cpp or a CUDA GPU. QUACK_TEST_DEVICE=cpu runs them against the CPU
stand-ins (tests/python/cpu_stand_in.py): a self-check of the tests and of the Python layer.
"""

import os

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
qnn = pytest.importorskip("quack_cpp.nn")
G = pytest.importorskip("quack_cpp.gemm_act_ops")

import torch.nn.functional as F  # noqa: E402

from reference import assert_rule  # noqa: E402

DEVICE = os.environ.get("QUACK_TEST_DEVICE", "cuda")
if DEVICE == "cuda":
    pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="checks CUDA itself")

STAND_IN = True  # QUACK_TEST_DEVICE=cpu runs this module on the CPU stand-ins (conftest.py)

f32, bf16, f16, f64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
ACTS = ["identity", "relu", "relu_sq", "gelu_tanh_approx", "silu", "tanh", "gelu_erf", "quick_gelu"]
GATED = ["swiglu", "swiglu_oai", "reglu", "geglu", "glu"]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rand(*shape, dtype=bf16, scale=1.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def post_ref(name, pre):
    """postact of a preact (interleaved pairs for a gated name), in pre's dtype's math."""
    if name in GATED:
        return G.gated_torch(name, pre[..., 0::2], pre[..., 1::2])
    return G.act_torch(name, pre)


# --------------------------------------------------------------------------------------------
# The functional ops
# --------------------------------------------------------------------------------------------


def _ref_preact(A, B, C, bias):
    pre = A.double() @ B.double()
    if C is not None:
        pre = pre + C.double()
    if bias is not None:
        pre = pre + (bias.double() if bias.dim() == 1 else bias.double()[:, None, :])
    return pre


def _torch_preact(A, B, C, bias):
    pre = A @ B
    if C is not None:
        pre = pre + C
    if bias is not None:
        pre = pre + (bias.to(pre.dtype) if bias.dim() == 1 else bias.to(pre.dtype)[:, None, :])
    return pre


@pytest.mark.parametrize("act", ACTS + GATED)
@pytest.mark.parametrize("shape", [(256, 192, 128), (200, 136, 72), ((3, 64), 80, 64),
                                   (127, 250, 63)], ids=str)  # last: unaligned K and N (pads, plain stores)
@pytest.mark.parametrize("with_bias", [False, True])
def test_gemm_act(act, shape, with_bias):
    M, N, K = shape
    lead = M if isinstance(M, tuple) else (M,)
    A = rand(*lead, K)
    W = rand(*(lead[:-1]), N, K, scale=0.2)
    B = W.mT
    bias = rand(N, dtype=f32) if with_bias else None
    pre, post = quack_cpp.gemm_act(A, B, act, bias=bias)
    ref = _ref_preact(A, B, None, bias)
    tch = _torch_preact(A, B, None, bias)
    assert pre.dtype == bf16 and post.dtype == bf16
    assert post.shape == ref.shape[:-1] + ((N // 2,) if act in GATED else (N,))
    assert_rule("preact", pre, ref, tch)
    assert_rule("postact", post, post_ref(act, ref), post_ref(act, tch.float()).to(bf16))


@pytest.mark.parametrize("act", ["gelu_tanh_approx", "swiglu"])
def test_gemm_act_options(act):
    A, W = rand(128, 64), rand(96, 64, scale=0.2)
    C = rand(128, 96)
    bias = rand(96)  # bf16 bias
    pre, post = quack_cpp.gemm_act(A, W.mT, act, C=C, bias=bias, alpha=0.5)
    ref = 0.5 * (A.double() @ W.double().T) + C.double() + bias.double()
    tch = 0.5 * (A @ W.T) + C + bias
    assert_rule("preact", pre, ref, tch)
    assert_rule("postact", post, post_ref(act, ref), post_ref(act, tch.float()).to(bf16))
    none, post2 = quack_cpp.gemm_act(A, W.mT, act, C=C, bias=bias, alpha=0.5, store_preact=False)
    assert none is None and torch.equal(post2, post)
    # postact_dtype defaults to out_dtype (QuACK's rule): float32 for both is compiled for bf16
    # inputs, a bf16 preact with an fp32 postact is not (quack/gemm_act.h).
    p32, q32 = quack_cpp.gemm_act(A, W.mT, act, out_dtype=f32)
    assert p32.dtype == f32 and q32.dtype == f32
    if DEVICE == "cuda":
        with pytest.raises(ValueError, match="preact bfloat16 and postact float32 are not compiled"):
            quack_cpp.gemm_act(A, W.mT, act, postact_dtype=f32)
    else:  # the CPU stand-in computes any dtype
        _, q32 = quack_cpp.gemm_act(A, W.mT, act, postact_dtype=f32)
        assert q32.dtype == f32


@pytest.mark.parametrize("act", GATED)
def test_gemm_gated_concat_layout(act):
    A, W = rand(192, 128), rand(2 * 72, 128, scale=0.2)  # interleaved rows
    bias = rand(2 * 72, dtype=f32)
    pre, post = quack_cpp.gemm_gated(A, W.mT, act, bias=bias)
    Wc, bc = G.deinterleave_gate_up(W), G.deinterleave_gate_up(bias)
    pre_c, post_c = quack_cpp.gemm_gated(A, Wc.mT, act, bias=bc, concat_layout=True)
    # Same preact (interleaved in both layouts) and postact, bit for bit: the same products.
    assert torch.equal(pre_c, pre) and torch.equal(post_c, post)


@pytest.mark.parametrize("act", ACTS + GATED)
@pytest.mark.parametrize("shape", [(256, 192, 128), (200, 72, 136), (127, 125, 63)], ids=str)
def test_gemm_dact(act, shape):
    M, H, K = shape  # dout (M, K) @ W (K, H): the gradient of postact (M, H)
    gated = act in GATED
    A, W = rand(M, K), rand(K, H, scale=0.2)
    preact = rand(M, 2 * H if gated else H, scale=2.0)
    dpre, post = quack_cpp.gemm_dact(A, W, preact, act)
    d = A.double() @ W.double()
    p = preact.double()
    if gated:
        dg, du = G.dgated_torch(act, p[:, 0::2], p[:, 1::2], d)
        ref_d = torch.stack((dg, du), -1).reshape(p.shape)
        t = A @ W
        tg, tu = G.dgated_torch(act, preact[:, 0::2].float(), preact[:, 1::2].float(), t.float())
        tch_d = torch.stack((tg, tu), -1).reshape(p.shape).to(bf16)
    else:
        ref_d = G.dact_torch(act, p, d)
        tch_d = G.dact_torch(act, preact.float(), (A @ W).float()).to(bf16)
    assert dpre.shape == preact.shape and post.shape == (M, H)
    assert_rule("dpreact", dpre, ref_d, tch_d)
    assert_rule("postact", post, post_ref(act, p), post_ref(act, preact.float()).to(bf16))
    dpre2, none = quack_cpp.gemm_dact(A, W, preact, act, store_postact=False)
    assert none is None and torch.equal(dpre2, dpre)


# dynamic_scheduler on gemm_dact / gemm_dgated (QuACK's keyword; GemmDActArgs::tile_counter):
# which cluster computes a tile changes, not what it computes, so dpreact and postact equal the
# static schedule's bit for bit (test_gemm_dact checks the values). Shapes of several tiles a
# CTA (4096 x 3072: hundreds of output tiles on 132 SMs, on the rule's 2x1-cluster tiles) and a
# batch; each dynamic call hands _C a counter (a null counter is the static schedule, which
# bitwise equality alone would not catch), and the launches leave it at 0. opcheck: the
# schema, the fake, the CPU stand-ins.
@pytest.mark.parametrize("act", ["relu", "gelu_tanh_approx", "swiglu"])
@pytest.mark.parametrize("shape", [(4096, 3072, 256), ((2, 1000), 3072, 256)], ids=str)
def test_gemm_dact_dynamic_scheduler(act, shape, monkeypatch):
    from quack_cpp import gemm_act_ops as ga
    from quack_cpp import gemm_ops as gm

    handed = []
    real = ga._C

    class Spy:  # _C with the fused backward GEMMs' tile_counter argument recorded
        def __getattr__(self, name):
            return getattr(real, name)

        def gemm_dact(self, *args):
            handed.append(args[8])  # a, b, preact, dpreact, postact, activation, stream, tuned, tile_counter
            return real.gemm_dact(*args)

        def gemm_dgated(self, *args):
            handed.append(args[8])
            return real.gemm_dgated(*args)

    monkeypatch.setattr(ga, "_C", Spy())
    M, H, K = shape
    L, M = M if isinstance(M, tuple) else (None, M)
    lead = (L,) if L else ()
    gated = act in GATED
    A, W = rand(*lead, M, K), rand(*lead, K, H, scale=0.2)
    preact = rand(*lead, M, 2 * H if gated else H, scale=2.0)
    static = quack_cpp.gemm_dact(A, W, preact, act)
    runs = [quack_cpp.gemm_dact(A, W, preact, act, dynamic_scheduler=True) for _ in range(2)]
    for dpre, post in runs:
        assert torch.equal(dpre, static[0]) and torch.equal(post, static[1])
    fn = quack_cpp.gemm_dgated if gated else quack_cpp.gemm_dact
    dpre, none = fn(A, W, preact, act, store_postact=False, dynamic_scheduler=True)
    assert none is None and torch.equal(dpre, static[0])
    if DEVICE == "cuda":
        torch.cuda.synchronize()
        counter = gm._TILE_COUNTERS[(A.get_device(), torch.cuda.current_stream().cuda_stream)]
        assert counter.item() == 0, "a launch left the tile counter off 0"
        assert [h for h in handed if h] == [counter.data_ptr()] * 3, f"counters handed: {handed}"
    op = torch.ops.quack_cpp.gemm_dgated if gated else torch.ops.quack_cpp.gemm_dact
    torch.library.opcheck(op.default, (A[..., :64, :].contiguous(), W,
                                       preact[..., :64, :].contiguous(), act, bf16, bf16, True,
                                       False, True))


def test_batched_and_empty():
    A, W = rand(3, 64, 96), rand(3, 128, 96, scale=0.2)
    pre, post = quack_cpp.gemm_gated(A, W.mT, "swiglu")
    ref = A.double() @ W.double().mT
    assert_rule("preact", pre, ref, A @ W.mT)
    pre0, post0 = quack_cpp.gemm_act(rand(0, 64), rand(128, 64).mT, "relu")
    assert pre0.shape == (0, 128) and post0.shape == (0, 128)


# --------------------------------------------------------------------------------------------
# The other compiled dtypes: fp16 inputs (fp16 outputs) for every fused op, and fp32 preact and
# postact of bf16 inputs for gemm_act / gemm_gated (out_dtype=torch.float32)
# --------------------------------------------------------------------------------------------

# Activations computed through tanh.approx.f32 (relative error about 2^-11): the fp32 outputs'
# tolerance against float64 (an fp32 torch peer has none of that error).
APPROX = ("gelu_tanh_approx", "silu", "tanh", "geglu")


def _poison_allocator():
    """Blocks the caching allocator hands out next hold NaN (0xFF bytes: NaN in bf16, fp16 and
    fp32), so an output element the kernel leaves unwritten fails the comparison."""
    if DEVICE == "cuda":
        for nbytes in (1 << 24, 1 << 20, 1 << 20, 1 << 16):
            torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0xFF)


def _check_f32(name, got, ref, act=None):
    """An fp32 output of fp32 accumulation against float64: 1e-5 relative (2e-3 where the
    activation goes through tanh.approx), of max(1, max|ref|)."""
    assert got.dtype == f32, f"{name}: {got.dtype}"
    assert_rule(name, got, ref, rtol_no_torch=2e-3 if act in APPROX else 1e-5)


@pytest.mark.parametrize("act", ACTS + GATED)
@pytest.mark.parametrize("shape", [(256, 192, 128), ((3, 64), 80, 64), (127, 250, 63)], ids=str)
def test_gemm_act_fp16(act, shape):
    M, N, K = shape
    lead = M if isinstance(M, tuple) else (M,)
    A = rand(*lead, K, dtype=f16)
    B = rand(*(lead[:-1]), N, K, dtype=f16, scale=0.2).mT
    bias = rand(N, dtype=f16)
    C = rand(*lead, N, dtype=f16)
    _poison_allocator()
    pre, post = quack_cpp.gemm_act(A, B, act, C=C, bias=bias)
    ref = _ref_preact(A, B, C, bias)
    tch = _torch_preact(A, B, C, bias)
    assert pre.dtype == f16 and post.dtype == f16
    assert_rule("preact", pre, ref, tch)
    assert_rule("postact", post, post_ref(act, ref), post_ref(act, tch.float()).to(f16))
    _poison_allocator()
    none, post2 = quack_cpp.gemm_act(A, B, act, C=C, bias=bias, store_preact=False)
    assert none is None and post2.dtype == f16
    assert_rule("postact", post2, post_ref(act, ref), post_ref(act, tch.float()).to(f16))


@pytest.mark.parametrize("act", ACTS + GATED)
@pytest.mark.parametrize("shape", [(256, 192, 128), (127, 125, 63)], ids=str)
def test_gemm_dact_fp16(act, shape):
    M, H, K = shape
    gated = act in GATED
    A, W = rand(M, K, dtype=f16), rand(K, H, dtype=f16, scale=0.2)
    preact = rand(M, 2 * H if gated else H, dtype=f16, scale=2.0)
    _poison_allocator()
    dpre, post = quack_cpp.gemm_dact(A, W, preact, act)
    d, p = A.double() @ W.double(), preact.double()
    t, pf = (A @ W).float(), preact.float()
    if gated:
        dg, du = G.dgated_torch(act, p[:, 0::2], p[:, 1::2], d)
        ref_d = torch.stack((dg, du), -1).reshape(p.shape)
        tg, tu = G.dgated_torch(act, pf[:, 0::2], pf[:, 1::2], t)
        tch_d = torch.stack((tg, tu), -1).reshape(p.shape).to(f16)
    else:
        ref_d = G.dact_torch(act, p, d)
        tch_d = G.dact_torch(act, pf, t).to(f16)
    assert dpre.dtype == f16 and post.dtype == f16
    assert_rule("dpreact", dpre, ref_d, tch_d)
    assert_rule("postact", post, post_ref(act, p), post_ref(act, pf).to(f16))


@pytest.mark.parametrize("act", ["swiglu", "geglu"])
def test_gemm_gated_concat_layout_fp16(act):
    A, W = rand(192, 128, dtype=f16), rand(2 * 72, 128, dtype=f16, scale=0.2)
    bias = rand(2 * 72, dtype=f32)
    pre, post = quack_cpp.gemm_gated(A, W.mT, act, bias=bias)
    Wc, bc = G.deinterleave_gate_up(W), G.deinterleave_gate_up(bias)
    pre_c, post_c = quack_cpp.gemm_gated(A, Wc.mT, act, bias=bc, concat_layout=True)
    assert pre.dtype == f16 and post.dtype == f16
    assert torch.equal(pre_c, pre) and torch.equal(post_c, post)


@pytest.mark.parametrize("act", ACTS + GATED)
@pytest.mark.parametrize("shape", [(256, 192, 128), ((3, 64), 80, 64), (127, 250, 63)], ids=str)
def test_gemm_act_fp32_out(act, shape):
    """bf16 inputs, out_dtype=torch.float32: preact and postact in fp32 (postact_dtype follows
    out_dtype), C in fp32, with and without preact."""
    M, N, K = shape
    lead = M if isinstance(M, tuple) else (M,)
    A = rand(*lead, K)
    B = rand(*(lead[:-1]), N, K, scale=0.2).mT
    bias = rand(N, dtype=f32)
    C = rand(*lead, N, dtype=f32)
    _poison_allocator()
    pre, post = quack_cpp.gemm_act(A, B, act, C=C, bias=bias, out_dtype=f32)
    ref = _ref_preact(A, B, C, bias)
    _check_f32("preact", pre, ref)
    _check_f32("postact", post, post_ref(act, ref), act)
    _poison_allocator()
    none, post2 = quack_cpp.gemm_act(A, B, act, bias=bias, store_preact=False, postact_dtype=f32)
    assert none is None
    _check_f32("postact", post2, post_ref(act, _ref_preact(A, B, None, bias)), act)


@cuda_only
@pytest.mark.parametrize("dtype,out", [(f16, f16), (bf16, f32)], ids=str)
@pytest.mark.parametrize("gated", [False, True])
def test_c_api_poisoned_padded_outputs(dtype, out, gated):
    """The ops' launch on NaN outputs whose rows are padded past N: every element is written,
    nothing in the padding."""
    M, N, K = 129, 264, 72
    act = "swiglu" if gated else "gelu_tanh_approx"
    A, W = rand(M, K, dtype=dtype), rand(N, K, dtype=dtype, scale=0.2)
    n_post = N // 2 if gated else N
    pre_p = torch.full((M, N + 8), float("nan"), device="cuda", dtype=out)
    post_p = torch.full((M, n_post + 8), float("nan"), device="cuda", dtype=out)
    pre, post = pre_p[:, :N], post_p[:, :n_post]
    op = G.GemmGated if gated else G.GemmAct
    op.launch((pre, post), A, W.mT, None, None, act, 1.0, 0.0, True, out, out)
    ref = A.double() @ W.double().T
    if out == f32:
        _check_f32("preact", pre, ref)
        _check_f32("postact", post, post_ref(act, ref), act)
    else:
        assert_rule("preact", pre, ref, A @ W.T)
        assert_rule("postact", post, post_ref(act, ref), post_ref(act, (A @ W.T).float()).to(out))
    assert torch.isnan(pre_p[:, N:]).all() and torch.isnan(post_p[:, n_post:]).all()


def test_errors():
    A, W = rand(64, 64), rand(96, 64)
    with pytest.raises(ValueError, match="activation"):
        quack_cpp.gemm_act(A, W.mT, "gelu")
    with pytest.raises(ValueError, match="gemm_gated: .*even"):
        quack_cpp.gemm_gated(A, rand(95, 64).mT, "swiglu")
    with pytest.raises(ValueError, match="gated"):
        quack_cpp.gemm_gated(A, W.mT, "relu")
    with pytest.raises(ValueError, match="gemm_act: concat_layout is True with the activation "
                                         "'relu'"):
        quack_cpp.gemm_act(A, W.mT, "relu", concat_layout=True)
    # act_linear's preact against postact (gated: 2H columns), checked in the forward.
    with pytest.raises(ValueError, match=r"act_linear: preact has shape \(64, 90\), expected "
                                         r"\(64, 96\)"):
        G.act_linear(rand(64, 90), rand(32, 48), rand(64, 48), "swiglu")


@pytest.mark.parametrize("act", ["relu", "silu", "swiglu", "reglu"])
@pytest.mark.parametrize("K", [64, 0])
def test_c09_nan_inf_in_c(act, K):
    """C09 (shared/cases/handed.md) for gemm_act and gemm_gated. beta = 0 (the op's beta; the
    functional API adds C with beta = 1): C is never read, so a C full of NaN gives exactly the
    outputs of the call without C, with no NaN. beta = 1 (``gemm_act(C=...)``): a NaN and a +Inf
    in C reach preact at their elements and postact through the activation (NaN stays NaN;
    act(+Inf) and glu(g, +Inf) as the float64 formula), every other element as the reference.
    K = 0 runs the fill path."""
    M, N = 128, 96
    A, W = rand(M, K), rand(N, K, scale=0.2)
    op = G.gemm_gated_op if act in GATED else G.gemm_act_op
    base = op(A, W.mT, None, None, act, 1.0, 0.0, True, bf16, bf16)
    nan_c = torch.full((M, N), float("nan"), device=DEVICE, dtype=bf16)
    unread = op(A, W.mT, nan_c, None, act, 1.0, 0.0, True, bf16, bf16)
    for name, x, y in zip(("preact", "postact"), base, unread):
        assert not torch.isnan(x).any(), name
        assert torch.equal(x, y), f"{name}: a NaN C with beta = 0 changed the result"
    C = rand(M, N)
    C[5, 7] = float("nan")
    C[M - 1, N - 1] = float("inf")  # column N - 1 is odd: an up column for the gated ones
    pre, post = quack_cpp.gemm_act(A, W.mT, act, C=C)
    ref, tch = _ref_preact(A, W.mT, C, None), _torch_preact(A, W.mT, C, None)
    ref_post = post_ref(act, ref)
    assert_rule("preact", pre, ref, tch)  # finite elements (a NaN/Inf where ref is finite fails)
    assert_rule("postact", post, ref_post, post_ref(act, tch.float()).to(bf16))
    assert int((~torch.isfinite(ref)).sum()) == 2
    for name, got, want in (("preact", pre, ref), ("postact", post, ref_post)):
        odd = ~torch.isfinite(want)
        assert odd.any(), name
        got, want = got.double()[odd], want[odd]
        assert torch.equal(torch.isnan(got), torch.isnan(want)), (name, got, want)
        assert torch.equal(got[~torch.isnan(want)], want[~torch.isnan(want)]), (name, got, want)


# --------------------------------------------------------------------------------------------
# gemm / Linear with a bias
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bias_dtype", [f32, bf16])
def test_gemm_bias(bias_dtype):
    A, W, bias = rand(200, 128), rand(136, 128), rand(136, dtype=bias_dtype)
    D = quack_cpp.gemm(A, W.mT, bias=bias)
    assert_rule("d", D, A.double() @ W.double().T + bias.double(), A @ W.T + bias.to(bf16))


@pytest.mark.parametrize("L,per_batch", [(None, False), (3, False), (3, True)],
                         ids=["2d", "batched-shared", "batched-per-batch"])
@pytest.mark.parametrize("bias_dtype", [f32, bf16])
def test_gemm_bias_backward(L, per_batch, bias_dtype):
    """The backward of quack_cpp.gemm(A, B, bias=bias) (gemm_ops._bias_grad): dbias is the column
    sum of dD over the rows, and over the batches for a (N,) bias shared by them, per batch for
    an (L, N) bias; in bias's dtype. dA and dB as without a bias. Against float64 autograd and
    torch in the same dtypes."""
    M, N, K = 200, 136, 128
    lead = () if L is None else (L,)
    A, W = rand(*lead, M, K), rand(*lead, N, K, scale=0.2)
    bias = rand(*((L, N) if per_batch else (N,)), dtype=bias_dtype)
    dD = rand(*lead, M, N)

    def grads(fn, dtype=None):
        ts = [t.detach().clone().to(dtype or t.dtype).requires_grad_(True) for t in (A, W, bias)]
        out = fn(*ts)
        out.backward(dD.to(out.dtype))
        return [out.detach()] + [t.grad for t in ts]

    def add(y, b):
        return y + (b if b.dim() == 1 else b[:, None, :])

    lib = grads(lambda a, w, b: quack_cpp.gemm(a, w.mT, bias=b))
    ref = grads(lambda a, w, b: add(a @ w.mT, b), torch.float64)
    tch = grads(lambda a, w, b: add(a @ w.mT, b.to(bf16)))
    assert lib[3].dtype == bias_dtype and lib[3].shape == bias.shape
    for name, x, r, t in zip(("d", "dA", "dB", "dbias"), lib, ref, tch):
        assert_rule(name, x, r, t, dtype=bf16)


# --------------------------------------------------------------------------------------------
# The column bias (colvec_bias: (M,) / (L, M) added to every column) of gemm, gemm_act and
# gemm_gated, alone and with the row bias
# --------------------------------------------------------------------------------------------

# (L or None, colvec per batch): 2-D; batched with one (M,) vector shared by the batches;
# batched with an (L, M) one.
COLVEC_BATCHING = [(None, False), (3, False), (3, True)]
COLVEC_IDS = ["2d", "batched-shared", "batched-per-batch"]


def _add_biases(y, bias, colvec):
    """y (.., M, N) + bias (N,) / (L, N) over the rows + colvec (M,) / (L, M) over the
    columns, in y's dtype."""
    if bias is not None:
        b = bias.to(y.dtype)
        y = y + (b if b.dim() == 1 else b[:, None, :])
    if colvec is not None:
        y = y + colvec.to(y.dtype)[..., :, None]
    return y


@pytest.mark.parametrize("L,per_batch", COLVEC_BATCHING, ids=COLVEC_IDS)
@pytest.mark.parametrize("col_dtype", [f32, bf16])  # fp32, or the output dtype
@pytest.mark.parametrize("with_row", [False, True])
def test_gemm_colvec_bias(L, per_batch, col_dtype, with_row):
    """quack_cpp.gemm(A, B, bias=..., colvec_bias=...): D = A @ B + bias[n] + colvec[m],
    forward (on a poisoned allocator) and backward: dcolvec_bias is the row sum of dD (over the
    batches too for a shared (M,) vector, per batch for (L, M)), in colvec_bias's dtype; dA,
    dB and dbias as without it. Against float64 autograd and torch in bf16. M != N, so a
    transposed use of the vector would fail."""
    M, N, K = 200, 136, 128
    lead = () if L is None else (L,)
    A, W = rand(*lead, M, K), rand(*lead, N, K, scale=0.2)
    bias = rand(N, dtype=f32) if with_row else None
    colvec = rand(*((L, M) if per_batch else (M,)), dtype=col_dtype)
    dD = rand(*lead, M, N)
    leaves = [A, W, colvec] + ([bias] if with_row else [])

    def grads(fn, dtype=None):
        ts = [t.detach().clone().to(dtype or t.dtype).requires_grad_(True) for t in leaves]
        out = fn(*ts)
        out.backward(dD.to(out.dtype))
        return [out.detach()] + [t.grad for t in ts]

    def lib_fn(a, w, c, b=None):
        return quack_cpp.gemm(a, w.mT, bias=b, colvec_bias=c)

    _poison_allocator()
    lib = grads(lib_fn)
    ref = grads(lambda a, w, c, b=None: _add_biases(a @ w.mT, b, c), torch.float64)
    tch = grads(lambda a, w, c, b=None: _add_biases(a @ w.mT, b, c.to(bf16)))
    assert lib[3].dtype == col_dtype and lib[3].shape == colvec.shape
    names = ("d", "dA", "dB", "dcolvec_bias", "dbias")
    for name, x, r, t in zip(names, lib, ref, tch):
        assert_rule(name, x, r, t, dtype=bf16)
    # Without a gradient: the same D (the fast path without autograd, or the C++ eager path's
    # hand-over to Python for a column bias).
    with torch.no_grad():
        D = quack_cpp.gemm(A, W.mT, bias=bias, colvec_bias=colvec)
    assert torch.equal(D, lib[0])


@pytest.mark.parametrize("act", ["identity", "relu_sq", "gelu_tanh_approx", "swiglu", "reglu"])
@pytest.mark.parametrize("L,per_batch", COLVEC_BATCHING, ids=COLVEC_IDS)
@pytest.mark.parametrize("col_dtype", [f32, bf16])  # fp32, or the output dtype
@pytest.mark.parametrize("with_row", [False, True])
def test_gemm_act_colvec_bias(act, L, per_batch, col_dtype, with_row):
    """gemm_act / gemm_gated with colvec_bias (and the row bias, and C): preact = A @ B + C +
    bias[n] + colvec[m] (one value per row m, on gate and up columns alike), postact =
    act(preact), on a poisoned allocator; store_preact=False gives the same postact."""
    M, N, K = (64, 144, 96) if L else (200, 136, 72)
    lead = () if L is None else (L,)
    A, B = rand(*lead, M, K), rand(*lead, N, K, scale=0.2).mT
    C = rand(*lead, M, N)
    bias = rand(N, dtype=f32) if with_row else None
    colvec = rand(*((L, M) if per_batch else (M,)), dtype=col_dtype)
    _poison_allocator()
    pre, post = quack_cpp.gemm_act(A, B, act, C=C, bias=bias, colvec_bias=colvec)
    ref = _add_biases(A.double() @ B.double() + C.double(), bias, colvec)
    tch = _add_biases(A @ B + C, bias, colvec)
    assert pre.dtype == bf16 and pre.shape == ref.shape
    assert post.shape == ref.shape[:-1] + ((N // 2,) if act in GATED else (N,))
    assert_rule("preact", pre, ref, tch)
    assert_rule("postact", post, post_ref(act, ref), post_ref(act, tch.float()).to(bf16))
    _poison_allocator()
    fn = quack_cpp.gemm_gated if act in GATED else quack_cpp.gemm_act
    none, post2 = fn(A, B, act, C=C, bias=bias, store_preact=False, colvec_bias=colvec)
    assert none is None and torch.equal(post2, post)


@pytest.mark.parametrize("act", ["swiglu", "geglu"])
def test_gemm_gated_colvec_bias_concat_layout(act):
    """The concat layout ([W_gate; W_up], bias [b_gate; b_up]) with a column bias: the same
    preact and postact as the interleaved layout, bit for bit (colvec_bias is per row, not
    reordered)."""
    A, W = rand(192, 128), rand(2 * 72, 128, scale=0.2)
    bias, colvec = rand(2 * 72, dtype=f32), rand(192, dtype=f32)
    pre, post = quack_cpp.gemm_gated(A, W.mT, act, bias=bias, colvec_bias=colvec)
    Wc, bc = G.deinterleave_gate_up(W), G.deinterleave_gate_up(bias)
    pre_c, post_c = quack_cpp.gemm_gated(A, Wc.mT, act, bias=bc, concat_layout=True,
                                         colvec_bias=colvec)
    assert torch.equal(pre_c, pre) and torch.equal(post_c, post)
    ref = _add_biases(A.double() @ W.double().T, bias, colvec)
    assert_rule("preact", pre, ref, _add_biases(A @ W.T, bias, colvec))


@pytest.mark.parametrize("act", ["relu", "swiglu"])
def test_gemm_act_colvec_bias_fp16_and_fp32_out(act):
    """The other compiled dtypes: fp16 inputs and outputs with an fp16 column bias (the output
    dtype), and bf16 inputs with fp32 preact and postact and an fp32 column bias."""
    M, N, K = 128, 96, 64
    A16, B16 = rand(M, K, dtype=f16), rand(N, K, dtype=f16, scale=0.2).mT
    c16 = rand(M, dtype=f16)
    _poison_allocator()
    pre, post = quack_cpp.gemm_act(A16, B16, act, colvec_bias=c16)
    ref = _add_biases(A16.double() @ B16.double(), None, c16)
    tch = _add_biases(A16 @ B16, None, c16)
    assert pre.dtype == f16 and post.dtype == f16
    assert_rule("preact", pre, ref, tch)
    assert_rule("postact", post, post_ref(act, ref), post_ref(act, tch.float()).to(f16))
    A, B = rand(M, K), rand(N, K, scale=0.2).mT
    c32, b32 = rand(M, dtype=f32), rand(N, dtype=f32)
    _poison_allocator()
    pre, post = quack_cpp.gemm_act(A, B, act, bias=b32, out_dtype=f32, colvec_bias=c32)
    ref = _add_biases(A.double() @ B.double(), b32, c32)
    _check_f32("preact", pre, ref)
    _check_f32("postact", post, post_ref(act, ref), act)


def test_colvec_bias_k0_and_empty():
    """K = 0 (the fill path): D / preact = the biases broadcast; M = 0: an empty result with an
    empty (0,) column bias."""
    M, N = 64, 48
    A, W = rand(M, 0), rand(N, 0)
    bias, colvec = rand(N, dtype=f32), rand(M, dtype=f32)
    ref = bias.double()[None, :] + colvec.double()[:, None]
    D = quack_cpp.gemm(A, W.mT, bias=bias, colvec_bias=colvec)
    assert_rule("d", D, ref, (bias[None, :] + colvec[:, None]).to(bf16))
    pre, post = quack_cpp.gemm_act(A, W.mT, "relu", colvec_bias=colvec)
    assert_rule("preact", pre, colvec.double()[:, None].expand(M, N),
                colvec[:, None].expand(M, N).to(bf16))
    D0 = quack_cpp.gemm(rand(0, 64), rand(N, 64).mT, colvec_bias=rand(0, dtype=f32))
    assert D0.shape == (0, N)


def test_colvec_bias_errors():
    """A bad colvec_bias raises before any launch, naming colvec_bias, what came and what was
    expected: wrong shape (N instead of M), rank, batch extent, dtype, device, stride, type; in
    gemm, gemm_act and gemm_gated, through the custom op and under FakeTensorMode too."""
    M, N, K = 64, 96, 32
    A, W = rand(M, K), rand(N, K)
    A3, W3 = rand(3, M, K), rand(3, N, K)
    other = "cpu" if DEVICE == "cuda" else "meta"
    calls = {
        "gemm": lambda a, w, c: quack_cpp.gemm(a, w.mT, colvec_bias=c),
        "gemm_act": lambda a, w, c: quack_cpp.gemm_act(a, w.mT, "relu", colvec_bias=c),
        "gemm_gated": lambda a, w, c: quack_cpp.gemm_gated(a, w.mT, "swiglu", colvec_bias=c),
    }
    for fn, call in calls.items():
        cases = [
            (A, W, rand(N, dtype=f32), rf"{fn}: colvec_bias has shape \(96,\) float32, "
                                       rf"expected \(M,\) = \(64,\)"),
            (A, W, rand(1, M, dtype=f32), rf"{fn}: colvec_bias has 2 dimensions"),
            (A3, W3, rand(2, M, dtype=f32), rf"{fn}: colvec_bias has shape \(2, 64\) float32, "
                                            rf"expected \(M,\) or \(L, M\) = \(64,\) or "
                                            rf"\(3, 64\)"),
            (A, W, rand(M, dtype=f32).double(), rf"{fn}: colvec_bias has dtype float64"),
            (A, W, torch.zeros(M, dtype=torch.int32, device=DEVICE),
             rf"{fn}: colvec_bias .*int32"),
            (A, W, rand(2 * M, dtype=f32)[::2], rf"{fn}: colvec_bias has stride 2 along M"),
            (A, W, torch.zeros(M, device=other), rf"{fn}: colvec_bias is on {other}"),
        ]
        for a, w, c, match in cases:
            with pytest.raises(ValueError, match=match):
                call(a, w, c)
        with pytest.raises(TypeError, match=rf"{fn}: colvec_bias is list"):
            call(A, W, [0.0] * M)
    # The custom op itself (impl) and its fake kernel check too.
    bad = rand(N, dtype=f32)
    with pytest.raises(ValueError, match=r"gemm: colvec_bias has shape"):
        torch.ops.quack_cpp.gemm(A, W.mT, None, 1.0, 0.0, bf16, False, None, None, None, bad)
    with pytest.raises(ValueError, match=r"gemm_act: colvec_bias has shape"):
        torch.ops.quack_cpp.gemm_act(A, W.mT, None, None, "relu", 1.0, 0.0, True, bf16, bf16,
                                     False, bad)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fa, fw, fb = mode.from_tensor(A), mode.from_tensor(W), mode.from_tensor(bad)
        for fn, call in calls.items():
            with pytest.raises(ValueError, match=rf"{fn}: colvec_bias has shape"):
                call(fa, fw, fb)
        ok = mode.from_tensor(rand(M, dtype=f32))
        assert quack_cpp.gemm(fa, fw.mT, colvec_bias=ok).shape == (M, N)


def test_colvec_bias_opcheck():
    """torch.library.opcheck of gemm (with its autograd: the colvec_bias gradient) and gemm_act
    with a column bias."""
    A, W = rand(64, 32), rand(48, 32)
    colvec, bias = rand(64, dtype=f32), rand(48, dtype=f32)
    torch.library.opcheck(torch.ops.quack_cpp.gemm.default,
                          (A.requires_grad_(True), W.mT, None, 1.0, 0.0, bf16, False, None,
                           None, bias, colvec.requires_grad_(True)))
    torch.library.opcheck(torch.ops.quack_cpp.gemm_act.default,
                          (A.detach(), W.mT, None, bias, "relu", 1.0, 0.0, True, bf16, bf16,
                           False, colvec.detach()))


def test_colvec_bias_compile():
    """torch.compile(fullgraph=True) of gemm with both biases, forward and backward, and
    gemm_gated with a column bias: the eager results."""
    torch._dynamo.reset()
    A, W = rand(64, 128), rand(96, 128, scale=0.2)
    colvec, bias = rand(64, dtype=f32), rand(96, dtype=f32)
    dD = rand(64, 96)

    def f(a, w, c, b):
        return quack_cpp.gemm(a, w.mT, bias=b, colvec_bias=c)

    def run(fn):
        ts = [t.detach().clone().requires_grad_(True) for t in (A, W, colvec, bias)]
        out = fn(*ts)
        out.backward(dD)
        return [out.detach()] + [t.grad for t in ts]

    eager = run(f)
    compiled = run(torch.compile(f, fullgraph=True, dynamic=False))
    # The GEMMs are the same kernels; the bias gradients are torch reductions (Triton's when
    # compiled: another summation order).
    for name, e, c in zip(("d", "dA", "dB", "dcolvec_bias", "dbias"), eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-4, msg=name)

    def g(a, w, c):
        return quack_cpp.gemm_gated(a, w.mT, "swiglu", colvec_bias=c)

    for e, c in zip(g(A, W, colvec), torch.compile(g, fullgraph=True, dynamic=False)(A, W,
                                                                                      colvec)):
        assert torch.equal(e, c)


@pytest.mark.parametrize("shape", [(2, 37, 256), (1000, 256)], ids=str)
@pytest.mark.parametrize("bias_dtype", [bf16, f32])
def test_linear_bias_backward(shape, bias_dtype):
    q = qnn.Linear(256, 384, bias=True, device=DEVICE, dtype=bf16)
    t = torch.nn.Linear(256, 384, bias=True, device=DEVICE, dtype=bf16)
    if bias_dtype != bf16:
        q.bias.data = q.bias.data.to(bias_dtype)
    t.load_state_dict({k: v.to(bf16) for k, v in q.state_dict().items()})
    x = rand(*shape)
    dy = rand(*shape[:-1], 384)
    outs = {}
    for name, m in (("q", q), ("t", t)):
        xl = x.clone().requires_grad_(True)
        y = m(xl)
        y.backward(dy)
        outs[name] = (y.detach(), xl.grad, m.weight.grad, m.bias.grad)
    xd = x.double().requires_grad_(True)
    wd = q.weight.detach().double().requires_grad_(True)
    bd = q.bias.detach().double().requires_grad_(True)
    yd = F.linear(xd, wd, bd)
    yd.backward(dy.double())
    ref = (yd.detach(), xd.grad, wd.grad, bd.grad)
    assert outs["q"][3].dtype == bias_dtype
    for i, name in enumerate(("y", "dx", "dW", "db")):
        assert_rule(name, outs["q"][i], ref[i], outs["t"][i], dtype=bf16)


# --------------------------------------------------------------------------------------------
# MLP and its two layers
# --------------------------------------------------------------------------------------------


class TorchMLP(torch.nn.Module):
    """The torch block the MLP replaces: fc1, the activation (gate/up interleaved, or halves),
    fc2."""

    def __init__(self, d, h, o, act, bias, dtype, concat=False):
        super().__init__()
        self.act, self.concat = act, concat
        self.fc1 = torch.nn.Linear(d, 2 * h if act in GATED else h, bias=bias, device=DEVICE,
                                   dtype=dtype)
        self.fc2 = torch.nn.Linear(h, o, bias=bias, device=DEVICE, dtype=dtype)

    def forward(self, x):
        y = self.fc1(x)
        if self.act in GATED:
            if self.concat:
                g, u = y.chunk(2, dim=-1)
            else:
                g, u = y[..., 0::2], y[..., 1::2]
            return self.fc2(G.gated_torch(self.act, g, u))
        return self.fc2(G.act_torch(self.act, y))


def _grads(m, x, dy):
    xl = x.detach().clone().requires_grad_(True)
    for p in m.parameters():
        p.grad = None
    y = m(xl)
    y.backward(dy)
    return [y.detach(), xl.grad] + [p.grad for p in m.parameters()]


def _check_block(q, x, dy, concat=False):
    act = q.activation
    bias = q.fc1.bias is not None
    d, h, o = q.in_features, q.hidden_features, q.out_features
    dt = x.dtype  # the compute dtype (the module's)
    t = TorchMLP(d, h, o, act, bias, dt, concat)
    t.load_state_dict(q.state_dict())
    r = TorchMLP(d, h, o, act, bias, f64, concat)
    r.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    lib, tch, ref = _grads(q, x, dy), _grads(t, x, dy), _grads(r, x.double(), dy.double())
    names = ["y", "dx"] + [n for n, _ in q.named_parameters()]
    for name, a, b, c in zip(names, lib, ref, tch):
        assert a.dtype == (dt if name in ("y", "dx") else c.dtype), name
        assert_rule(name, a, b, c, dtype=dt)


@pytest.mark.parametrize("act", ["gelu_tanh_approx", "relu_sq", "relu", "silu"] + GATED)
@pytest.mark.parametrize("bias", [False, True])
def test_mlp_forward_backward(act, bias):
    q = qnn.MLP(256, 192, 128, activation=act, bias=bias, device=DEVICE, dtype=bf16)
    x, dy = rand(4, 50, 256), rand(4, 50, 128)
    _check_block(q, x, dy)


@pytest.mark.parametrize("act,concat", [("gelu_tanh_approx", False), ("relu_sq", False),
                                         ("swiglu", False), ("geglu", False), ("swiglu", True)])
def test_mlp_fp16(act, concat):
    """An fp16 MLP (the fp16 instances of gemm_gated / gemm_act, gemm_dgated / gemm_dact and
    the fp16 GEMMs of the backward) against a torch fp16 block and float64."""
    q = qnn.MLP(256, 192, 128, activation=act, bias=True, device=DEVICE, dtype=f16,
                concat_layout=concat)
    x, dy = rand(4, 50, 256, dtype=f16), rand(4, 50, 128, dtype=f16)
    if DEVICE == "cuda":
        assert q._kernels(x)  # the kernels, not the torch fallback
    _check_block(q, x, dy, concat=concat)


def test_layers_fp16_take_the_kernels():
    """LinearAct, DActLinear and MLP run the fused kernels for fp16 (not the torch fallback)."""
    fc1 = qnn.LinearAct(128, 192, activation="swiglu", bias=True, device=DEVICE, dtype=f16)
    fc2 = qnn.DActLinear(96, 64, activation="swiglu", bias=True, device=DEVICE, dtype=f16)
    q = qnn.MLP(128, 96, 64, activation="relu_sq", bias=True, device=DEVICE, dtype=f16)
    x = rand(70, 128, dtype=f16)
    if DEVICE == "cuda":
        assert fc1._kernels(x) and q._kernels(x)
    pre, post = fc1(x)
    assert pre.dtype == f16 and post.dtype == f16 and post.shape == (70, 96)
    y = fc2(pre, post)
    assert y.dtype == f16
    ref = TorchMLP(128, 96, 64, "swiglu", True, f64)
    ref.fc1.load_state_dict({k: v.double() for k, v in fc1.state_dict().items()})
    ref.fc2.load_state_dict({k: v.double() for k, v in fc2.state_dict().items()})
    tch = TorchMLP(128, 96, 64, "swiglu", True, f16)
    tch.fc1.load_state_dict(fc1.state_dict())
    tch.fc2.load_state_dict(fc2.state_dict())
    with torch.no_grad():
        assert_rule("y", y.detach(), ref(x.double()), tch(x))


@pytest.mark.parametrize("act", ["swiglu", "geglu"])
def test_mlp_concat_layout(act):
    q = qnn.MLP(256, 192, 128, activation=act, bias=True, device=DEVICE, dtype=bf16,
                concat_layout=True)
    x, dy = rand(300, 256), rand(300, 128)
    _check_block(q, x, dy, concat=True)


def test_state_dict_is_a_two_linear_block():
    q = qnn.MLP(64, 48, 32, activation="swiglu", bias=True, device=DEVICE, dtype=bf16)
    t = TorchMLP(64, 48, 32, "swiglu", True, bf16)
    assert list(q.state_dict()) == list(t.state_dict())
    t.load_state_dict(q.state_dict())
    q.load_state_dict(t.state_dict())
    assert q.fc1.weight.shape == (96, 64) and q.fc2.weight.shape == (32, 48)
    # QuACK's keywords and the demo's call.
    m = qnn.MLP(64, 48, out_features=64, bias1=False, bias2=False, activation="swiglu",
                device=DEVICE)
    assert m.fc1.bias is None and m.fc2.bias is None and m.fc1.weight.shape == (96, 64)


@pytest.mark.parametrize("concat", [False, True])
def test_from_llama(concat):
    d, h = 128, 96
    gate = torch.nn.Linear(d, h, bias=False, device=DEVICE, dtype=bf16)
    up = torch.nn.Linear(d, h, bias=False, device=DEVICE, dtype=bf16)
    down = torch.nn.Linear(h, d, bias=False, device=DEVICE, dtype=bf16)
    q = qnn.MLP.from_llama(gate, up, down, concat_layout=concat)
    assert q.activation == "swiglu" and q.fc1.weight.dtype == bf16
    x = rand(64, d)
    with torch.no_grad():
        wg, wu, wd = (m.weight.double() for m in (gate, up, down))
        xd = x.double()
        ref = F.linear(F.silu(F.linear(xd, wg)) * F.linear(xd, wu), wd)
        tch = down(F.silu(gate(x)) * up(x))
        assert_rule("y", q(x), ref, tch)
    wg, wu, wd = q.llama_weights()
    assert torch.equal(wg, gate.weight) and torch.equal(wu, up.weight) and torch.equal(wd, down.weight)
    q2 = qnn.MLP(d, h, activation="swiglu", device=DEVICE, dtype=bf16)
    q2.load_llama_weights(gate.weight, up.weight, down.weight)
    assert torch.equal(q2.fc1.weight, G.interleave_gate_up(torch.cat((gate.weight, up.weight))))


def test_layers_compose_like_the_mlp():
    fc1 = qnn.LinearAct(128, 192, activation="swiglu", bias=True, device=DEVICE, dtype=bf16)
    fc2 = qnn.DActLinear(96, 64, activation="swiglu", bias=True, device=DEVICE, dtype=bf16)
    q = qnn.MLP(128, 96, 64, activation="swiglu", bias=True, device=DEVICE, dtype=bf16)
    q.fc1.load_state_dict(fc1.state_dict())
    q.fc2.load_state_dict(fc2.state_dict())
    x, dy = rand(70, 128), rand(70, 64)
    xa = x.clone().requires_grad_(True)
    pre, post = fc1(xa)
    assert post.shape == (70, 96)
    y = fc2(pre, post)
    y.backward(dy)
    lib = _grads(q, x, dy)
    assert torch.equal(y.detach(), lib[0]) and torch.equal(xa.grad, lib[1])
    assert torch.equal(fc1.weight.grad, q.fc1.weight.grad)
    assert torch.equal(fc2.bias.grad, q.fc2.bias.grad)


class _LayerPair(torch.nn.Module):
    """fc2(*fc1(x)) for a LinearAct fc1 and a DActLinear fc2 (a TorchMLP's state dict)."""

    def __init__(self, fc1, fc2):
        super().__init__()
        self.fc1, self.fc2 = fc1, fc2

    def forward(self, x):
        return self.fc2(*self.fc1(x))


@pytest.mark.parametrize("act", ["swiglu", "geglu"])
def test_linear_act_concat_fallback_pairs_with_kernels(act):
    """LinearAct(concat_layout=True) on the torch fallback (in_features 20, not a multiple of 8)
    returns preact interleaved, as the kernels do: DActLinear on the kernels reads it so."""
    fc1 = qnn.LinearAct(20, 192, activation=act, bias=True, device=DEVICE, dtype=bf16,
                        concat_layout=True)
    fc2 = qnn.DActLinear(96, 64, activation=act, bias=True, device=DEVICE, dtype=bf16)
    q = _LayerPair(fc1, fc2)
    x, dy = rand(70, 20), rand(70, 64)
    assert not fc1._kernels(x)
    with torch.no_grad():
        pre, _ = fc1(x)
        halves = F.linear(x, fc1.weight, fc1.bias)
        assert torch.equal(pre[:, 0::2], halves[:, :96])
        assert torch.equal(pre[:, 1::2], halves[:, 96:])
    t = TorchMLP(20, 96, 64, act, True, bf16, concat=True)
    t.load_state_dict(q.state_dict())
    r = TorchMLP(20, 96, 64, act, True, f64, concat=True)
    r.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    lib, tch, ref = _grads(q, x, dy), _grads(t, x, dy), _grads(r, x.double(), dy.double())
    names = ["y", "dx"] + [n for n, _ in q.named_parameters()]
    for name, a, b, c in zip(names, lib, ref, tch):
        assert_rule(name, a, b, c, dtype=bf16)


@pytest.mark.parametrize("act", ["gelu_tanh_approx", "swiglu"])
def test_linear_act_postact_gradient(act):
    """postact used on its own (not through DActLinear): its gradient reaches x and W."""
    fc1 = qnn.LinearAct(128, 192, activation=act, device=DEVICE, dtype=bf16)
    x = rand(64, 128)
    xa = x.clone().requires_grad_(True)
    _, post = fc1(xa)
    g = rand(*post.shape)
    post.backward(g)
    xd = x.double().requires_grad_(True)
    wd = fc1.weight.detach().double().requires_grad_(True)
    pd = post_ref(act, F.linear(xd, wd))
    pd.backward(g.double())
    assert_rule("dx", xa.grad, xd.grad, None, rtol_no_torch=3e-2)
    assert_rule("dW", fc1.weight.grad, wd.grad, None, rtol_no_torch=3e-2)


def test_fuse_grad_accum():
    q = qnn.MLP(128, 96, 64, activation="swiglu", device=DEVICE, dtype=bf16,
                fuse_grad_accum=True)
    t = TorchMLP(128, 96, 64, "swiglu", False, bf16)
    t.load_state_dict(q.state_dict())
    xs, dys = [rand(40, 128) for _ in range(2)], [rand(40, 64) for _ in range(2)]
    for m in (q, t):
        for x, dy in zip(xs, dys):
            m(x).backward(dy)
    r = TorchMLP(128, 96, 64, "swiglu", False, f64)
    r.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    for x, dy in zip(xs, dys):
        r(x.double()).backward(dy.double())
    for (n, a), b, c in zip(q.named_parameters(), r.parameters(), t.parameters()):
        assert_rule(n, a.grad, b.grad, c.grad, dtype=bf16)


@pytest.mark.parametrize("act,bias", [("swiglu", False), ("relu_sq", True)])
@pytest.mark.parametrize("how", ["grad", "inputs"])
def test_fuse_grad_accum_partial_backward(act, bias, how):
    """fuse_grad_accum with a backward that computes one gradient (how: autograd.grad, or
    backward(inputs=...)) once every weight.grad exists: each .grad the pass does not
    accumulate into is kept bit for bit (x's gradient alone; autograd.grad of a weight), the
    targeted weight's .grad is dW accumulated (backward(inputs=[weight])); the gradient against
    torch's block and a float64 one run the same way (LinearAct's and DActLinear's backward per
    graph task: _registrar.task_grads; with bias, each bias a target too: ActLinear's bias is
    its fourth argument)."""
    q = qnn.MLP(128, 96, 64, activation=act, bias=bias, device=DEVICE, dtype=bf16,
                fuse_grad_accum=True)
    t = TorchMLP(128, 96, 64, act, bias, bf16)
    t.load_state_dict(q.state_dict())
    r = TorchMLP(128, 96, 64, act, bias, f64)
    r.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    x, dy1, dy2 = rand(40, 128), rand(40, 64), rand(40, 64)
    for target in ("x",) + tuple(range(len(list(q.parameters())))):  # x, then each parameter
        out = []
        for m in (q, t, r):
            dt = next(m.parameters()).dtype
            ps = list(m.parameters())
            for p in ps:
                p.grad = None
            m(x.to(dt)).backward(dy1.to(dt))
            before = [p.grad.clone() for p in ps]
            xg = x.detach().to(dt).requires_grad_(True)
            y = m(xg)
            wanted = xg if target == "x" else ps[target]
            if how == "grad":
                (g,) = torch.autograd.grad(y, wanted, dy2.to(dt))
            else:
                y.backward(dy2.to(dt), inputs=[wanted])
                g = wanted.grad
            out.append((g, before, [p.grad for p in ps]))
        (g, before, after), (tg, _, tafter), (rg, _, rafter) = out
        for i, (b, a) in enumerate(zip(before, after)):
            if target == i and how == "inputs":
                assert_rule(f"parameter {i} accumulated", a, rafter[i], tafter[i], dtype=bf16)
            else:  # not this pass's to write
                assert torch.equal(a, b), f"{act} {how} {target}: parameter {i}'s .grad changed"
        assert_rule(f"{act} {how} d{target}", g, rg, tg, dtype=bf16)


def test_inference_stores_no_preact(monkeypatch):
    q = qnn.MLP(128, 96, 64, activation="swiglu", device=DEVICE, dtype=bf16)
    seen = []
    real = G.gemm_gated_op.impl
    monkeypatch.setattr(G.gemm_gated_op, "impl", lambda *a: seen.append(a[7]) or real(*a))
    x = rand(32, 128)
    with torch.no_grad():
        y = q(x)
    assert seen == [False] or DEVICE != "cuda"
    t = TorchMLP(128, 96, 64, "swiglu", False, bf16)
    t.load_state_dict(q.state_dict())
    r = TorchMLP(128, 96, 64, "swiglu", False, f64)
    r.load_state_dict({k: v.double() for k, v in q.state_dict().items()})
    with torch.no_grad():
        assert_rule("y", y, r(x.double()), t(x))


def test_fallbacks_are_torch():
    q = qnn.MLP(20, 12, 8, activation="swiglu", bias=True)  # fp32 on the CPU, odd sizes
    t = TorchMLP(20, 12, 8, "swiglu", True, f32).to("cpu")
    t.load_state_dict(q.state_dict())
    x = torch.randn(5, 20)
    assert torch.allclose(q(x), t(x), atol=1e-6)


def test_compile_fullgraph_forward_backward():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    q = qnn.MLP(128, 96, 64, activation="swiglu", bias=True, device=DEVICE, dtype=bf16)
    x = rand(2, 37, 128)

    def loss(m, x):
        return m(x).float().square().mean()

    def grads(fn):
        for p in q.parameters():
            p.grad = None
        xl = x.detach().clone().requires_grad_(True)
        out = fn(q, xl)
        out.backward()
        return [out.detach(), xl.grad] + [p.grad.clone() for p in q.parameters()]

    eager = grads(loss)
    compiled = grads(torch.compile(loss, fullgraph=True, dynamic=False))
    assert sum(counters["graph_break"].values()) == 0
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, rtol=1e-2, atol=1e-3)


def test_compile_mlp_backward_has_no_torch_activation_gradient():
    """Inside mlp postact gets no gradient (act_linear's backward gives preact's): the compiled
    backward holds gemm_dgated and no act' in torch. torch.compile materializes a zero gradient
    for an output without one; unmarked, it would go through act' (sigmoid) and be added."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    torch._dynamo.reset()
    backward_graphs = []

    def keep_backward(gm, _):
        backward_graphs.append(gm)
        return make_boxed_func(gm)

    backend = aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm), bw_compiler=keep_backward)
    q = qnn.MLP(128, 96, 64, activation="swiglu", device=DEVICE, dtype=bf16)
    x = rand(2, 37, 128).requires_grad_(True)
    torch.compile(lambda m, x: m(x).float().square().mean(), backend=backend,
                  fullgraph=True, dynamic=False)(q, x).backward()
    assert len(backward_graphs) == 1
    targets = [str(n.target) for n in backward_graphs[0].graph.nodes if n.op == "call_function"]
    assert any("gemm_dgated" in t for t in targets), targets
    assert not any("sigmoid" in t for t in targets), targets


def test_compile_fullgraph_ops():
    torch._dynamo.reset()
    A, W, b = rand(64, 128), rand(96, 128), rand(96, dtype=f32)
    dout, W2 = rand(64, 32), rand(32, 48)

    def f(A, W, b, dout, W2):
        pre, post = quack_cpp.gemm_gated(A, W.mT, "swiglu", bias=b)
        d, p2 = quack_cpp.gemm_dgated(dout, W2, pre, "swiglu")
        return pre, post, d, p2

    eager = f(A, W, b, dout, W2)
    compiled = torch.compile(f, fullgraph=True, dynamic=False)(A, W, b, dout, W2)
    for e, c in zip(eager, compiled):
        assert torch.equal(e, c)


@cuda_only
def test_cuda_graph():
    q = qnn.MLP(128, 96, 64, activation="swiglu", bias=True, device="cuda", dtype=bf16)
    x = rand(64, 128).requires_grad_(True)
    dy = rand(64, 64)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            q(x).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    for p in q.parameters():
        p.grad = None
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = q(x)
        y.backward(dy)
    with torch.no_grad():
        x.copy_(rand(64, 128))
    g.replay()
    torch.cuda.synchronize()
    xe = x.detach().clone().requires_grad_(True)
    q2 = qnn.MLP(128, 96, 64, activation="swiglu", bias=True, device="cuda", dtype=bf16)
    q2.load_state_dict(q.state_dict())
    ye = q2(xe)
    ye.backward(dy)
    assert torch.equal(y.detach(), ye.detach()) and torch.equal(x.grad, xe.grad)
    for a, b in zip(q.parameters(), q2.parameters()):
        assert torch.equal(a.grad, b.grad)
