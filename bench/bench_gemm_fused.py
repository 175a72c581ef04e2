"""Fused-epilogue GEMMs and the MLP block: quack_cpp beside torch, torch.compile and QuACK 0.2.0
(issue 17 item 9).

    python3 bench/bench_gemm_fused.py                  # everything, burst and sustained
    python3 bench/bench_gemm_fused.py --quick          # burst only, one activation of each kind
    python3 bench/bench_gemm_fused.py --ops gated,dgated --shapes 16384x14336x4096 --methods burst
    python3 bench/bench_gemm_fused.py --ops mlp        # the MLP blocks only

Ops, per shape M x N x K (bf16, or fp16 with --dtype fp16: inputs and outputs; fp32 accumulation;
N = preact's columns, so a gated postact has N / 2 and gemm_dgated's GEMM is M x N x K with
preact 2N wide):
  gemm     ours quack_cpp.gemm(x, W.T)                              (the ratio's base: "plain")
  act      ours gemm_act(x, W.T, act) (preact stored) | torch: x @ W.T, then act | torch.compile of
           that | QuACK 0.2.0 gemm_act(x, W.T, activation=act, tuned=False) for relu, relu_sq,
           gelu_tanh_approx
  dact     ours gemm_dact(dout, W, preact, act) | torch: dout @ W, then dpreact = d * act'(preact)
           and postact = act(preact) | compile | QuACK gemm_dact(..., tuned=False)
  gated    ours gemm_gated(x, W.T, act) | torch: x @ W.T, then glu(y[:, 0::2], y[:, 1::2]) | compile
  dgated   ours gemm_dgated(dout, W, preact, act) | torch: dout @ W, then the two gradients and
           glu | compile
  bias     ours gemm(x, W.T, bias=b) | torch.addmm(b, x, W.T) (cuBLASLt's bias epilogue) | compile
  mlp      fwd + bwd of the block at the Llama-8B shape (tokens 16384, d 4096, hidden 14336):
           SwiGLU: ours nn.MLP(activation="swiglu") | torch eager (gate_proj, up_proj, down_proj
           Linears, F.silu(g) * u) | torch.compile of it; relu^2: ours nn.MLP(activation=
           "relu_sq") | QuACK 0.2.0 quack.mlp.MLP(activation="relu_sq", tuned=False) | compile of
           the torch block.
QuACK 0.2.0 is imported when the peer is on PYTHONPATH (shared/peers/README.md); else skipped.

Tiles (A/B of the tile configurations, as bench_gemm.py --tiles): --tiles auto,128x192pp,...
makes "ours" one implementation per spec, "ours:<spec>": spec is "auto" (the tile rule) or a
kernel name's tile part (QUACK_GEMM_TILE, e.g. 128x128pp, 128x192pp, 128x256; a tile not compiled
for the op's epilogue, dtypes and layout runs the group's default instead: the device A/B build
-DQUACK_GEMM_AB_INSTANCES=ON adds the candidates of src/gemm/sm90/instances_ab.txt).
--plain-tile forces plain gemm's tile the same way (default auto). The environment is set
before every call, so each implementation runs its own tile whatever ran before it.

Methods (bench_gemm.py's, the implementations' order rotating between rounds): burst =
triton.testing.do_bench(warmup=25, rep=100, median), the acceptance method; sustained = batches of
back-to-back calls behind a torch.cuda._sleep, the SM clock printed beside (GEMM ops only).
--burst-rest-ms idles that long before each implementation's do_bench (each from the same idle
state: on a card whose clock falls under load, the implementation that runs second in a round
reads slower); default 0, the acceptance method as is. Records carry burst_rest_ms.

Output: JSON lines (--out) and a table last: ms per implementation, ours / plain gemm (the
acceptance bar: <= 1.03), best peer / ours (>= 1.0; >= 1.04 against torch at 16384x14336x4096).
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPES = [(16384, 14336, 4096), (16384, 4096, 14336), (8192, 8192, 8192)]
ACTS = ("relu", "relu_sq", "gelu_tanh_approx", "silu")
GATED = ("swiglu", "geglu")
GATED_NAMES = ("swiglu", "swiglu_oai", "reglu", "geglu", "glu")  # every gated activation
QUACK_ACTS = ("relu", "relu_sq", "gelu_tanh_approx")
OPS = ("act", "dact", "gated", "dgated", "bias", "mlp")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="burst only; relu_sq and swiglu; the MLP blocks")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--shapes", help="comma list of MxNxK")
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16",
                   help="inputs and outputs of the fused ops (not the MLP blocks: bf16)")
    p.add_argument("--acts", help="comma list of activations, each applied to the ops of its kind "
                        "(gated ones to gated / dgated, the others to act / dact; default per op kind)")
    p.add_argument("--methods", default="burst,sustained")
    p.add_argument("--impls", default="ours,torch,compile,quack")
    p.add_argument("--tiles", default=None,
                   help="comma list of tile configurations for ours (auto, 128x192pp, 128x128pp, 128x256)")
    p.add_argument("--plain-tile", default="auto", help="tile configuration of plain gemm (default auto)")
    p.add_argument("--burst-rounds", type=int, default=3)
    p.add_argument("--burst-rest-ms", type=float, default=0.0,
                   help="burst: idle this long before each implementation's do_bench, so each "
                        "starts from the same idle state (default 0: the acceptance method as is)")
    p.add_argument("--rounds", type=int, default=12, help="sustained rounds")
    p.add_argument("--drop", type=int, default=2)
    p.add_argument("--batch-ms", type=float, default=60.0)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "results"),
                                                 "bench_gemm_fused.jsonl"))
    return p.parse_args(argv)


def _quack():
    try:
        import quack.gemm_interface as qgi  # QuACK 0.2.0 (the peer)
        return qgi
    except Exception:  # noqa: BLE001 - an absent or broken peer is skipped, said aloud
        return None


def torch_act(F, torch, name, y):
    if name == "relu":
        return F.relu(y)
    if name == "relu_sq":
        return F.relu(y).square()
    if name == "gelu_tanh_approx":
        return F.gelu(y, approximate="tanh")
    if name == "silu":
        return F.silu(y)
    if name == "gelu_erf":
        return F.gelu(y)
    if name == "quick_gelu":
        return y * torch.sigmoid(1.702 * y)
    raise ValueError(f"activation {name!r}")


def torch_glu(F, torch, name, g, u):
    return (F.silu(g) if name == "swiglu" else F.gelu(g, approximate="tanh")) * u


def torch_dact(torch, name, pre, d):
    """(dpreact, postact) in torch, from the formulas (what an eager user writes)."""
    import torch.nn.functional as F
    if name == "relu":
        return d * (pre > 0), F.relu(pre)
    if name == "relu_sq":
        r = F.relu(pre)
        return 2 * d * r, r * pre
    if name == "gelu_tanh_approx":
        c = 0.7978845608028654
        t = torch.tanh(c * (pre + 0.044715 * pre * pre * pre))
        dg = 0.5 * (1 + t) + 0.5 * pre * (1 - t * t) * c * (1 + 3 * 0.044715 * pre * pre)
        return d * dg, 0.5 * pre * (1 + t)
    if name == "gelu_erf":
        cdf = 0.5 * (1 + torch.erf(pre * 0.7071067811865476))
        return d * (cdf + pre * 0.3989422804014327 * torch.exp(-0.5 * pre * pre)), pre * cdf
    if name in ("silu", "quick_gelu"):
        a = 1.0 if name == "silu" else 1.702
        s = torch.sigmoid(a * pre)
        return d * (s + a * pre * s * (1 - s)), pre * s
    raise ValueError(f"activation {name!r}")


def torch_dglu(torch, name, pre, d):
    import torch.nn.functional as F
    g, u = pre[:, 0::2], pre[:, 1::2]
    if name == "swiglu":
        s = torch.sigmoid(g)
        silu = g * s
        dg, du, post = d * u * s * (1 + g * (1 - s)), d * silu, silu * u
    else:
        dgelu, _ = torch_dact(torch, "gelu_tanh_approx", g, d * u)
        gl = F.gelu(g, approximate="tanh")
        dg, du, post = dgelu, d * gl, gl * u
    return torch.stack((dg, du), dim=-1).flatten(-2), post


def with_tile(fn, tile):
    """fn with QUACK_GEMM_TILE set to tile before every call ("auto": the tile rule)."""

    def f():
        os.environ["QUACK_GEMM_TILE"] = tile
        return fn()

    return f


def tiled(calls, tiles, plain_tile):
    """calls with "ours" split into "ours:<spec>" per spec of tiles (a list, or None: ours keeps
    the rule's tile) and plain gemm on plain_tile."""
    out = {}
    for k, v in calls.items():
        if k == "ours" and tiles:
            for t in tiles:
                out[f"ours:{t}"] = with_tile(v, t)
        elif k in ("ours", "plain"):
            out[k] = with_tile(v, plain_tile if k == "plain" else "auto")
        else:
            out[k] = v
    return out


def op_calls(torch, op, act, shape, impls, dtype="bf16"):
    """{impl: fn} for one (op, activation, shape) in `dtype` (bf16, fp16); fn runs the op once."""
    import torch.nn.functional as F
    import quack_cpp

    M, N, K = shape
    bf = torch.bfloat16 if dtype == "bf16" else torch.float16
    g = torch.Generator(device="cuda").manual_seed(1)
    rnd = lambda *s, scale=1.0: (torch.randn(*s, device="cuda", generator=g) * scale).to(bf)  # noqa: E731
    calls = {}
    if op in ("act", "gated", "bias"):
        x, W = rnd(M, K), rnd(N, K, scale=K ** -0.5)
        b = rnd(N)
        if op == "act":
            ours = lambda: quack_cpp.gemm_act(x, W.T, act)  # noqa: E731

            def tch():
                y = x @ W.T
                return y, torch_act(F, torch, act, y)
        elif op == "gated":
            ours = lambda: quack_cpp.gemm_gated(x, W.T, act)  # noqa: E731

            def tch():
                y = x @ W.T
                return y, torch_glu(F, torch, act, y[:, 0::2], y[:, 1::2])
        else:
            ours = lambda: quack_cpp.gemm(x, W.T, bias=b)  # noqa: E731

            def tch():
                return torch.addmm(b, x, W.T)
        calls["plain"] = lambda: quack_cpp.gemm(x, W.T)
        calls["ours"] = ours
        calls["torch"] = tch
        calls["compile"] = torch.compile(tch, dynamic=False) if op != "bias" else torch.compile(
            lambda: x @ W.T + b, dynamic=False)
        qgi = _quack() if op == "act" and act in QUACK_ACTS else None
        if qgi is not None:
            calls["quack"] = lambda: qgi.gemm_act(x, W.T, activation=act, tuned=False)
    else:  # dact, dgated: D = dout (M, K) @ W (K, N)
        dout, W = rnd(M, K), rnd(K, N, scale=K ** -0.5)
        pre = rnd(M, 2 * N if op == "dgated" else N, scale=2.0)
        if op == "dact":
            ours = lambda: quack_cpp.gemm_dact(dout, W, pre, act)  # noqa: E731

            def tch():
                return torch_dact(torch, act, pre, dout @ W)
        else:
            ours = lambda: quack_cpp.gemm_dgated(dout, W, pre, act)  # noqa: E731

            def tch():
                return torch_dglu(torch, act, pre, dout @ W)
        calls["plain"] = lambda: quack_cpp.gemm(dout, W)
        calls["ours"] = ours
        calls["torch"] = tch
        calls["compile"] = torch.compile(tch, dynamic=False)
        qgi = _quack() if op == "dact" and act in QUACK_ACTS else None
        if qgi is not None:
            calls["quack"] = lambda: qgi.gemm_dact(dout, W, pre, activation=act, tuned=False)
    return {k: v for k, v in calls.items() if k == "plain" or k in impls}


def mlp_calls(torch, act, impls, tokens=16384, d=4096, hidden=14336):
    """fwd + bwd of the block, {impl: fn}."""
    import torch.nn as nn
    import torch.nn.functional as F
    import quack_cpp.nn as qnn

    bf = torch.bfloat16
    torch.manual_seed(0)
    x = torch.randn(tokens, d, device="cuda", dtype=bf).requires_grad_(True)
    dy = torch.randn(tokens, d, device="cuda", dtype=bf)

    class TorchBlock(nn.Module):
        def __init__(self):
            super().__init__()
            if act == "swiglu":  # Llama: gate_proj, up_proj, down_proj
                self.gate = nn.Linear(d, hidden, bias=False, device="cuda", dtype=bf)
                self.up = nn.Linear(d, hidden, bias=False, device="cuda", dtype=bf)
            else:
                self.fc1 = nn.Linear(d, hidden, bias=False, device="cuda", dtype=bf)
            self.down = nn.Linear(hidden, d, bias=False, device="cuda", dtype=bf)

        def forward(self, x):
            if act == "swiglu":
                return self.down(F.silu(self.gate(x)) * self.up(x))
            return self.down(F.relu(self.fc1(x)).square())

    def step(m):
        def f():
            for p in m.parameters():
                p.grad = None
            x.grad = None
            m(x).backward(dy)
        return f

    calls = {}
    block = TorchBlock()
    ours = qnn.MLP(d, hidden, d, activation=act, device="cuda", dtype=bf)
    if act == "swiglu":
        ours.load_llama_weights(block.gate, block.up, block.down)
    calls["ours"] = step(ours)
    if act == "swiglu":
        calls["torch"] = step(block)
    calls["compile"] = step(torch.compile(block, dynamic=False))
    if act == "relu_sq" and "quack" in impls:
        try:
            from quack.mlp import MLP as QMLP  # QuACK 0.2.0

            q = QMLP(d, hidden, d, activation="relu_sq", device="cuda", dtype=bf, tuned=False)
            calls["quack"] = step(q)
        except Exception as e:  # noqa: BLE001
            print(f"  quack MLP: skipped ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    return {k: v for k, v in calls.items() if k in impls}


def warm(torch, calls):
    out = {}
    for n, f in calls.items():
        try:
            f()
            torch.cuda.synchronize()
            out[n] = f
        except Exception as e:  # noqa: BLE001 - a failing implementation is skipped, said aloud
            print(f"  {n}: skipped ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
    return out


def check(torch, op, calls):
    """Max |ours - torch| / max|torch| of the first output (a sanity check printed beside)."""
    ours = [k for k in calls if k == "ours" or k.startswith("ours:")]
    if not ours or "torch" not in calls:
        return None
    a, b = calls[ours[0]](), calls["torch"]()
    a = a[1] if isinstance(a, tuple) else a
    b = b[1] if isinstance(b, tuple) else b
    if a is None or b is None:
        return None
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_gemm_fused: needs torch")
        return 2
    if not torch.cuda.is_available():
        print("bench_gemm_fused: needs a CUDA GPU")
        return 2
    from bench_gemm import batched_fields, burst, sustained

    # Every (op, activation, shape) compiles its own graph: dynamo's default limit of 8 recompiles
    # would run the later ones eagerly under the "compile" label.
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)
    if args.quick:
        args.methods = "burst"
    methods = args.methods.split(",")
    tiles = args.tiles.split(",") if args.tiles else None
    impls = args.impls.split(",")
    ops = args.ops.split(",")
    shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
              if args.shapes else SHAPES)
    if _quack() is None:
        print("QuACK 0.2.0 not importable: its columns are skipped")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    rows = []

    def acts_for(op):  # --acts: the gated names go to gated / dgated, the others to act / dact
        gated = op in ("gated", "dgated")
        if op not in ("act", "dact") and not gated:
            return [None]  # bias
        if args.acts:
            return [a for a in args.acts.split(",") if (a in GATED_NAMES) == gated]
        if gated:
            return ["swiglu"] if args.quick else list(GATED)
        return ["relu_sq"] if args.quick else list(ACTS)

    with open(args.out, "w") as fout:
        for op in ops:
            if op == "mlp":
                continue
            for shape in shapes:
                for act in acts_for(op):
                    calls = warm(torch, tiled(op_calls(torch, op, act, shape, impls, args.dtype),
                                              tiles, args.plain_tile))
                    diff = check(torch, op, calls)
                    for m in methods:
                        ms = burst(torch, calls, args) if m == "burst" else sustained(torch, calls, args)
                        clk, extra = None, {}
                        if m != "burst":  # a Measured (bench_gemm.py)
                            clk, extra = ms.clk, batched_fields(ms)
                            ms = ms.ms
                        rec = dict(op=op, act=act, dtype=args.dtype, M=shape[0], N=shape[1], K=shape[2], method=m,
                                   sm_mhz=clk, rel_diff_vs_torch=diff,
                                   burst_rest_ms=args.burst_rest_ms if m == "burst" else None,
                                   **{f"ms_{n}": v for n, v in ms.items()}, **extra)
                        rows.append(rec)
                        fout.write(json.dumps(rec) + "\n")
                        fout.flush()
                        print(f"{op} {act or ''} {shape[0]}x{shape[1]}x{shape[2]} {m}: " +
                              "  ".join(f"{n} {v:.3f} ms" for n, v in ms.items()), flush=True)
                    del calls
                    torch.cuda.empty_cache()
        if "mlp" in ops:
            os.environ.pop("QUACK_GEMM_TILE", None)  # the MLP blocks: the tile rule
            for act in ("swiglu", "relu_sq"):
                calls = warm(torch, mlp_calls(torch, act, impls))
                ms = burst(torch, calls, args)
                rec = dict(op="mlp", act=act, M=16384, N=14336, K=4096, method="burst",
                           burst_rest_ms=args.burst_rest_ms, **{f"ms_{n}": v for n, v in ms.items()})
                rows.append(rec)
                fout.write(json.dumps(rec) + "\n")
                print(f"mlp {act} fwd+bwd: " + "  ".join(f"{n} {v:.3f} ms" for n, v in ms.items()),
                      flush=True)
                del calls
                torch.cuda.empty_cache()
    report(rows)
    return 0


def report(rows):
    print("\n| op | act | M x N x K | method | ours ms | plain | torch | compile | QuACK | "
          "ours/plain | torch/ours | compile/ours | QuACK/ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda v: f"{v:.3f}" if v else "-"  # noqa: E731
    worst = {}  # ours variant -> its burst ours/plain ratios
    for r in rows:
        # One table row per ours variant: "ours", or "ours:<spec>" with --tiles (spec in the op column).
        for key in [k for k in r if k == "ms_ours" or k.startswith("ms_ours:")] or ["ms_ours"]:
            o = r.get(key)
            spec = key[len("ms_ours:"):] if key.startswith("ms_ours:") else ""
            ratio = lambda k: (r[k] / o) if (o and r.get(k)) else None  # noqa: E731
            plain = (o / r["ms_plain"]) if (o and r.get("ms_plain")) else None
            if plain and r["method"] == "burst":
                worst.setdefault(spec, []).append(plain)
            print(f"| {r['op']}{':' + spec if spec else ''} | {r['act'] or '-'} | {r['M']}x{r['N']}x{r['K']} | "
                  f"{r['method']} | {f(o)} | {f(r.get('ms_plain'))} | {f(r.get('ms_torch'))} | "
                  f"{f(r.get('ms_compile'))} | {f(r.get('ms_quack'))} | {f(plain)} | {f(ratio('ms_torch'))} | "
                  f"{f(ratio('ms_compile'))} | {f(ratio('ms_quack'))} |")
    for spec, w in worst.items():
        print(f"burst{' ours:' + spec if spec else ''}: worst ours/plain {max(w):.3f}, geomean "
              f"{math.exp(sum(map(math.log, w)) / len(w)):.3f} (bar: <= 1.03)")


if __name__ == "__main__":
    sys.exit(main())
