"""quack_cpp.nn.RMSNorm as a drop-in for torch.nn.RMSNorm: signature, state dict, repr (these
run on CPU with any torch), and the CUDA forward/backward against float64 (GPU)."""

import inspect

import pytest

torch = pytest.importorskip("torch")
quack_cpp = pytest.importorskip("quack_cpp")
qnn = pytest.importorskip("quack_cpp.nn")

from reference import assert_rule, ref_rmsnorm, run  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_signature_matches_torch():
    ours = inspect.signature(qnn.RMSNorm.__init__).parameters
    theirs = inspect.signature(torch.nn.RMSNorm.__init__).parameters
    # torch's parameters in torch's order with torch's defaults, then our options keyword-only.
    assert list(ours)[:len(theirs)] == list(theirs)
    for name in theirs:
        assert ours[name].default == theirs[name].default, name
    extra = list(ours)[len(theirs):]
    assert extra == ["weight_offset"]
    assert ours["weight_offset"].kind is inspect.Parameter.KEYWORD_ONLY
    assert ours["weight_offset"].default == 0.0


@pytest.mark.parametrize("shape,kw", [(4096, {}), ((2, 64), {"eps": 1e-5}),
                                      (128, {"elementwise_affine": False})])
def test_state_dict_and_repr_compatible(shape, kw):
    q = qnn.RMSNorm(shape, **kw)
    t = torch.nn.RMSNorm(shape, **kw)
    assert repr(q).replace("quack_cpp", "") == repr(t)  # "RMSNorm((4096,), eps=None, ...)"
    assert q.extra_repr() == t.extra_repr()
    assert q.normalized_shape == t.normalized_shape and q.eps == t.eps
    assert list(q.state_dict()) == list(t.state_dict())
    if q.weight is not None:
        with torch.no_grad():
            t.weight.copy_(torch.randn_like(t.weight))
        q.load_state_dict(t.state_dict(), strict=True)
        assert torch.equal(q.weight, t.weight)
        with torch.no_grad():
            q.weight.mul_(3)
        t.load_state_dict(q.state_dict(), strict=True)
        assert torch.equal(q.weight, t.weight)
        q.reset_parameters()
        assert torch.equal(q.weight, torch.ones_like(q.weight))
    else:
        assert q.state_dict() == {} and t.state_dict() == {}


def test_dtype_device_kwargs():
    q = qnn.RMSNorm(64, dtype=torch.bfloat16, device="meta")
    assert q.weight.dtype == torch.bfloat16 and q.weight.device.type == "meta"


def test_cpu_input_falls_back_to_torch():
    q = qnn.RMSNorm((4, 32))
    t = torch.nn.RMSNorm((4, 32))
    with torch.no_grad():
        q.weight.copy_(torch.randn(4, 32))
        t.weight.copy_(q.weight)
    x = torch.randn(3, 4, 32)
    assert torch.equal(q(x), t(x))


@needs_gpu
@pytest.mark.parametrize("dtype,wdtype", [(torch.bfloat16, torch.float32),
                                          (torch.bfloat16, torch.bfloat16),
                                          (torch.float16, torch.float16),
                                          (torch.float32, torch.float32)], ids=str)
@pytest.mark.parametrize("shape,ns", [((4, 128, 4096), 4096), ((8, 3, 2, 500), (2, 500))],
                         ids=["N4096", "ns(2,500)"])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_forward_backward_vs_float64(dtype, wdtype, shape, ns, eps):
    torch.manual_seed(0)
    q = qnn.RMSNorm(ns, eps=eps, device="cuda", dtype=wdtype)
    t = torch.nn.RMSNorm(ns, eps=eps, device="cuda", dtype=wdtype)
    with torch.no_grad():
        q.weight.copy_(1 + 0.5 * torch.randn_like(q.weight))
        t.weight.copy_(q.weight)
    x = torch.randn(*shape, device="cuda").to(dtype)
    dy = torch.randn(*shape, device="cuda").to(dtype)
    xq, xt = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    yq, yt = q(xq), t(xt)
    assert yq.shape == yt.shape and yq.dtype == yt.dtype
    yq.backward(dy)
    yt.backward(dy)
    N = q.weight.numel()
    e = eps if eps is not None else torch.finfo(torch.float32).eps
    ref = run(ref_rmsnorm, x.reshape(-1, N), q.weight.detach().reshape(-1),
              dy=dy.reshape(-1, N), eps=e, f64=True)
    assert_rule("out", yq.reshape(-1, N), ref["out"], yt.reshape(-1, N), dtype=dtype)
    assert_rule("dx", xq.grad.reshape(-1, N), ref["dx"], xt.grad.reshape(-1, N), dtype=dtype)
    assert_rule("dw", q.weight.grad.reshape(-1), ref["dw"], t.weight.grad.reshape(-1), dtype=dtype)


@needs_gpu
def test_eps_none_is_float32_machine_eps():
    # Small inputs make eps visible: torch uses the opmath (fp32) epsilon for 16-bit inputs.
    torch.manual_seed(0)
    q = qnn.RMSNorm(1024, device="cuda")
    t = torch.nn.RMSNorm(1024, device="cuda")
    x = (torch.randn(64, 1024, device="cuda") * 1e-3).bfloat16()
    ref = ref_rmsnorm(x.double(), None, None, None, torch.finfo(torch.float32).eps)
    assert_rule("out", q(x), ref, t(x), dtype=torch.bfloat16)


@needs_gpu
def test_float64_cuda_input_falls_back_to_torch():
    q = qnn.RMSNorm(256, device="cuda", dtype=torch.float64)
    t = torch.nn.RMSNorm(256, device="cuda", dtype=torch.float64)
    x = torch.randn(4, 256, device="cuda", dtype=torch.float64)
    assert torch.equal(q(x), t(x))


@needs_gpu
def test_wrong_trailing_shape():
    q = qnn.RMSNorm(256, device="cuda")
    with pytest.raises(ValueError, match="normalized_shape"):
        q(torch.randn(4, 255, device="cuda"))


@needs_gpu
def test_module_compile_fullgraph():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(1024, 1024, device="cuda"),
                            qnn.RMSNorm(1024, device="cuda"))
    x = torch.randn(8, 64, 1024, device="cuda", requires_grad=True)
    y_e = m(x)
    y_e.float().square().mean().backward()
    g_e = (x.grad.clone(), m[1].weight.grad.clone())
    x.grad = None
    m.zero_grad(set_to_none=True)
    cm = torch.compile(m, fullgraph=True, dynamic=False)
    y_c = cm(x)
    y_c.float().square().mean().backward()
    torch.testing.assert_close(y_c, y_e, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, g_e[0], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(m[1].weight.grad, g_e[1], rtol=1e-4, atol=1e-5)
