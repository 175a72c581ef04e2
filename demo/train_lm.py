"""Train a small Llama-style LM with torch.nn.RMSNorm vs quack_cpp.nn.RMSNorm.

What it shows: swapping the model's RMSNorm layers for quack_cpp.nn.RMSNorm
leaves training unchanged (same loss curve, within run-to-run noise) and how
the step time compares. Three runs of the same model on the same batches:
  (a) torch.nn.RMSNorm, seed 0   (b) quack_cpp.nn.RMSNorm, seed 0
  (c) torch.nn.RMSNorm, seed 1   -- the noise yardstick
PASS when |a-b| <= max(0.02, 3*|a-c|), comparing each run's mean training loss
over its last 20 steps.

Model: 8 decoder layers, d=1024, 16 heads, SwiGLU MLP (hidden 2816), RoPE,
pre-norm RMSNorm before attention and MLP plus a final norm, embeddings tied
to the output head (~111M parameters); bf16 autocast, AdamW with linear
warm-up and cosine decay, seq len 512, 16 sequences (8192 tokens) a step.

Run (repo root, on a Hopper GPU, after scripts/prepare_corpus.sh):
    python3 demo/train_lm.py              # 3 x 200 steps
    python3 demo/train_lm.py --quick      # 3 x 30 steps
    python3 demo/train_lm.py --no-quack   # torch runs only
Writes results/train_lm.json and results/train_lm_loss.png (see --out).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_SEED = 1234          # batch order; independent of the model seed
TIMING_WARMUP = 10        # steps left out of the step-time statistics
FINAL_WINDOW = 20         # steps averaged for the final loss
COMPARE_FIRST = 20        # steps for the per-step |a-b| check
MIN_BOUND = 0.02          # floor of the acceptance bound

FULL = dict(n_layers=8, d_model=1024, n_heads=16, d_mlp=2816, seq_len=512, batch=16,
            lr=3e-4, min_lr_frac=0.1, weight_decay=0.1, clip=1.0, eps=1e-5)
TINY = dict(FULL, n_layers=2, d_model=64, n_heads=4, d_mlp=172, seq_len=64, batch=4)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="steps per run (default 200)")
    p.add_argument("--quick", action="store_true", help="30 steps per run")
    p.add_argument("--data", default=os.path.join(REPO, ".data"),
                   help="folder with train.bin/val.bin/meta.json (scripts/prepare_corpus.sh)")
    p.add_argument("--out", default=os.path.join(REPO, "results"), help="output folder")
    p.add_argument("--no-quack", action="store_true",
                   help="only the two torch.nn.RMSNorm runs (a) and (c)")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="after the runs, profile STEPS steps of each norm (torch.profiler) and "
                        "print the top ops by CUDA and CPU time (diagnoses step-time gaps)")
    p.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.steps is None:
        args.steps = 3 if args.cpu_smoke else (30 if args.quick else 200)
    if args.steps < 1:
        p.error("--steps must be >= 1")
    return args


# --------------------------------------------------------------------- model
def build_model(cfg, vocab, norm_cls, device):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, h = cfg["d_model"], cfg["n_heads"]
    hd = d // h

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False, device=device)
            self.out = nn.Linear(d, d, bias=False, device=device)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, h, hd).transpose(1, 3).unbind(2)  # B,h,T,hd
            cos, sin = cos.to(q.dtype), sin.to(q.dtype)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(B, T, d))

    class SwiGLU(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up = nn.Linear(d, 2 * cfg["d_mlp"], bias=False, device=device)
            self.out = nn.Linear(cfg["d_mlp"], d, bias=False, device=device)

        def forward(self, x):
            gate, up = self.gate_up(x).chunk(2, dim=-1)
            return self.out(F.silu(gate) * up)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = norm_cls(d, eps=cfg["eps"], device=device)
            self.attn = Attention()
            self.mlp_norm = norm_cls(d, eps=cfg["eps"], device=device)
            self.mlp = SwiGLU()

        def forward(self, x, cos, sin):
            x = x + self.attn(self.attn_norm(x), cos, sin)
            return x + self.mlp(self.mlp_norm(x))

    class LlamaLM(nn.Module):
        """Decoder-only LM; the output head shares the embedding matrix (tied)."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d, device=device)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg["n_layers"]))
            self.final_norm = norm_cls(d, eps=cfg["eps"], device=device)
            inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=device).float() / hd))
            ang = torch.outer(torch.arange(cfg["seq_len"], device=device).float(), inv)
            ang = torch.cat((ang, ang), dim=-1)                      # T, hd
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)

        def forward(self, idx):
            T = idx.shape[1]
            cos, sin = self.cos[:T], self.sin[:T]
            x = self.embed(idx)                      # fp32 residual stream
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return F.linear(self.final_norm(x), self.embed.weight)   # tied head

    return LlamaLM()


def init_weights(model, cfg, seed):
    """Seeded init of every Linear/Embedding, independent of the RNG the
    constructors used, so (a) and (b) start from bit-identical weights.
    Norm weights stay at their constructor value (ones)."""
    import torch
    import torch.nn as nn

    dev = next(model.parameters()).device
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    resid_std = 0.02 / math.sqrt(2 * cfg["n_layers"])
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                std = resid_std if name.endswith(".out") else 0.02
                mod.weight.normal_(0.0, std, generator=g)


def param_checksum(model):
    import torch
    with torch.no_grad():
        return float(sum(p.double().abs().sum() for p in model.parameters()))


# ---------------------------------------------------------------------- data
def load_data(folder, device):
    import numpy as np
    import torch
    for f in ("train.bin", "val.bin", "meta.json"):
        if not os.path.exists(os.path.join(folder, f)):
            sys.exit(f"train_lm: {os.path.join(folder, f)} missing; run scripts/prepare_corpus.sh")
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    tr = np.fromfile(os.path.join(folder, "train.bin"), dtype=np.uint16).astype(np.int64)
    va = np.fromfile(os.path.join(folder, "val.bin"), dtype=np.uint16).astype(np.int64)
    return meta, torch.from_numpy(tr).to(device), torch.from_numpy(va).to(device)


def batch_starts(n_tokens, cfg, steps):
    """Start offsets of every batch of every step, from a generator seeded
    independently of the model seed: all runs see the same batches."""
    import torch
    g = torch.Generator().manual_seed(DATA_SEED)
    return torch.randint(0, n_tokens - cfg["seq_len"] - 1, (steps, cfg["batch"]), generator=g)


# ------------------------------------------------------------------ training
def lr_at(step, steps, cfg):
    warm = max(1, round(0.1 * steps))
    if step < warm:
        return cfg["lr"] * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    lo = cfg["lr"] * cfg["min_lr_frac"]
    return lo + 0.5 * (cfg["lr"] - lo) * (1 + math.cos(math.pi * t))


def train_run(label, norm_name, norm_cls, seed, cfg, steps, train, val, vocab, device):
    import torch
    import torch.nn.functional as F

    cuda = device.type == "cuda"
    torch.manual_seed(seed)
    model = build_model(cfg, vocab, norm_cls, device)
    init_weights(model, cfg, seed)
    n_params = sum(p.numel() for p in model.parameters())
    checksum = param_checksum(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8, fused=cuda)

    T = cfg["seq_len"]
    starts = batch_starts(train.numel(), cfg, steps).to(device)
    offs = torch.arange(T + 1, device=device)
    losses = torch.zeros(steps, device=device)
    if cuda:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(steps)]
        torch.cuda.synchronize()
    host_t = []
    t0 = time.perf_counter()
    print(f"run {label}: {norm_name}, seed {seed}, "
          f"{n_params / 1e6:.1f}M params, init checksum {checksum:.6f}", flush=True)
    for step in range(steps):
        h0 = time.perf_counter()
        if cuda:
            ev[step][0].record()
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, steps, cfg)
        chunk = train[starts[step][:, None] + offs]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        if cuda:
            ev[step][1].record()
        host_t.append((time.perf_counter() - h0) * 1e3)
        if step % 50 == 0 or step == steps - 1:
            print(f"  step {step:4d}  loss {losses[step].item():.4f}", flush=True)
    if cuda:
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) for a, b in ev]
    else:
        times = host_t
    wall = time.perf_counter() - t0

    # validation loss on the whole val split (non-overlapping sequences)
    model.eval()
    nseq = (val.numel() - 1) // T
    vl, vn = 0.0, 0
    with torch.no_grad():
        for i in range(0, nseq, cfg["batch"]):
            idx = torch.arange(i, min(nseq, i + cfg["batch"]), device=device)[:, None] * T
            chunk = val[idx + offs]
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                logits = model(chunk[:, :-1])
            vl += F.cross_entropy(logits.float().view(-1, vocab), chunk[:, 1:].reshape(-1),
                                  reduction="sum").item()
            vn += chunk[:, 1:].numel()

    losses = losses.tolist()
    timed = times[TIMING_WARMUP:] if len(times) > TIMING_WARMUP else times
    med = statistics.median(timed)
    window = losses[-min(FINAL_WINDOW, steps):]
    res = dict(label=label, norm=norm_name, seed=seed,
               n_params=n_params, init_checksum=checksum, losses=losses, step_ms=times,
               timed_from_step=steps - len(timed), median_step_ms=med,
               median_host_ms=statistics.median(host_t[TIMING_WARMUP:] or host_t),
               tokens_per_s=cfg["batch"] * T / (med / 1e3),
               final_loss=sum(window) / len(window), val_loss=vl / max(1, vn),
               wall_s=wall)
    if cuda:
        res["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        del model, opt
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    print(f"  final loss (mean of last {len(window)}) {res['final_loss']:.4f}, "
          f"val loss {res['val_loss']:.4f}, median step {med:.2f} ms, {wall:.1f} s", flush=True)
    return res


# -------------------------------------------------------------------- report
def plot(runs, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train_lm: matplotlib not found; no plot")
        return None
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                  gridspec_kw=dict(height_ratios=[3, 2]))
    for r in runs.values():
        ax.plot(r["losses"], label=f"({r['label']}) {r['norm']} seed {r['seed']}", lw=1.2)
    ax.set_ylabel("training loss")
    ax.set_title("Llama-style LM on the KJV Bible: torch vs quack_cpp RMSNorm")
    ax.legend()
    ax.grid(alpha=0.3)
    a = runs["a"]["losses"]
    for k, style in (("b", "-"), ("c", "--")):
        if k in runs:
            ax2.plot([x - y for x, y in zip(runs[k]["losses"], a)], style,
                     label=f"({k}) - (a)", lw=1)
    ax2.axhline(0, color="k", lw=0.5)
    ax2.set_xlabel("step")
    ax2.set_ylabel("loss difference")
    ax2.legend()
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(runs, cfg, steps, args, env):
    a = runs["a"]
    summary = {}
    print("\n== train_lm results ==")
    print(f"{'run':<4}{'norm':<30}{'seed':>5}{'final loss':>12}{'val loss':>10}"
          f"{'median ms':>11}{'tokens/s':>12}")
    for r in runs.values():
        print(f"{r['label']:<4}{r['norm']:<30}{r['seed']:>5}{r['final_loss']:>12.4f}"
              f"{r['val_loss']:>10.4f}{r['median_step_ms']:>11.2f}{r['tokens_per_s']:>12,.0f}")
    print(f"(final loss: mean of the last {min(FINAL_WINDOW, steps)} steps; step time: median "
          f"over steps {a['timed_from_step']}..{steps - 1}; tokens/s from the median)")
    print("host enqueue ms per step (median; close to the step time means the CPU is the "
          "bottleneck): " + ", ".join(f"{r['label']} {r['median_host_ms']:.2f}"
                                      for r in runs.values()))
    if "c" in runs:
        summary["three_abs_a_minus_c"] = 3 * abs(a["final_loss"] - runs["c"]["final_loss"])
        summary["bound"] = max(MIN_BOUND, summary["three_abs_a_minus_c"])
    if "b" in runs:
        b = runs["b"]
        n = min(COMPARE_FIRST, steps)
        summary["abs_a_minus_b"] = abs(a["final_loss"] - b["final_loss"])
        summary["max_abs_step_diff_first_%d" % n] = max(
            abs(x - y) for x, y in zip(a["losses"][:n], b["losses"][:n]))
        summary["same_init"] = a["init_checksum"] == b["init_checksum"]
        summary["step_time_ratio_b_over_a"] = b["median_step_ms"] / a["median_step_ms"]
        print(f"|a-b|                 = {summary['abs_a_minus_b']:.4f}")
    if "c" in runs:
        print(f"3*|a-c|               = {summary['three_abs_a_minus_c']:.4f}")
        print(f"bound max({MIN_BOUND}, 3*|a-c|) = {summary['bound']:.4f}")
    if "b" in runs:
        n = min(COMPARE_FIRST, steps)
        print(f"max per-step |a-b| over the first {n} steps = "
              f"{summary['max_abs_step_diff_first_%d' % n]:.4f}")
        print(f"identical init for a and b: {summary['same_init']}")
        print(f"step time b/a = {summary['step_time_ratio_b_over_a']:.3f}")
        summary["pass"] = summary["abs_a_minus_b"] <= summary["bound"]
        print(("PASS" if summary["pass"] else "FAIL") +
              f": |a-b| {summary['abs_a_minus_b']:.4f} "
              f"{'<=' if summary['pass'] else '>'} bound {summary['bound']:.4f}")
    os.makedirs(args.out, exist_ok=True)
    png = plot(runs, os.path.join(args.out, "train_lm_loss.png"))
    out = dict(config=dict(cfg, steps=steps, data_seed=DATA_SEED, timing_warmup=TIMING_WARMUP,
                           final_window=FINAL_WINDOW, tied_embeddings=True,
                           tokens_per_step=cfg["batch"] * cfg["seq_len"]),
               env=env, summary=summary, runs=runs, plot=png)
    jpath = os.path.join(args.out, "train_lm.json")
    with open(jpath, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {jpath}" + (f" and {png}" if png else ""))
    return summary


def import_quack_norm():
    """quack_cpp.nn.RMSNorm, trying the in-tree python/ folder as a fallback."""
    err = None
    for attempt in range(2):
        try:
            import quack_cpp.nn as qnn
            return qnn.RMSNorm
        except (ImportError, AttributeError) as e:  # AttributeError: no RMSNorm
            err = e
            src = os.path.join(REPO, "python")
            if attempt == 0 and src not in sys.path:
                sys.path.insert(0, src)
                sys.modules.pop("quack_cpp", None)
                sys.modules.pop("quack_cpp.nn", None)
            else:
                break
    print(f"train_lm: cannot import quack_cpp.nn.RMSNorm ({type(err).__name__}: {err}).\n"
          "  Build and install the quack_cpp package first (or put it on PYTHONPATH),\n"
          "  or pass --no-quack to run the torch baselines only.", file=sys.stderr)
    sys.exit(3)


def profile_steps(label, norm_cls, cfg, steps, train, vocab, device, out_dir):
    """Profiles `steps` training steps with torch.profiler; prints and saves the top ops."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = build_model(cfg, vocab, norm_cls, device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], fused=device.type == "cuda")
    T = cfg["seq_len"]
    starts = batch_starts(train.numel(), cfg, steps + 3).to(device)
    offs = torch.arange(T + 1, device=device)

    def step(i):
        chunk = train[starts[i][:, None] + offs]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            logits = model(chunk[:, :-1])
        F.cross_entropy(logits.float().view(-1, vocab), chunk[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(3):  # warm-up
        step(i)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for i in range(steps):
            step(3 + i)
        if device.type == "cuda":
            torch.cuda.synchronize()
    avg = prof.key_averages()
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    text = (f"== profile {label} ({steps} steps), by {sort} ==\n" +
            avg.table(sort_by=sort, row_limit=15) +
            f"\n== profile {label}, by self_cpu_time_total ==\n" +
            avg.table(sort_by="self_cpu_time_total", row_limit=15))
    print(text)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"train_lm_profile_{label}.txt"), "w") as f:
        f.write(text)
    del model, opt


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    if args.cpu_smoke:
        if torch is None:
            sys.exit("train_lm: --cpu-smoke needs torch")
        device, cfg = torch.device("cpu"), dict(TINY)
        torch.set_num_threads(max(1, os.cpu_count() or 1))
    else:
        if torch is None or not torch.cuda.is_available():
            print("train_lm: needs a CUDA GPU (Hopper); none found")
            sys.exit(2)
        device, cfg = torch.device("cuda"), dict(FULL)
        torch.set_float32_matmul_precision("high")   # TF32 for any fp32 matmul
        cc = torch.cuda.get_device_capability()
        if cc[0] < 9:
            print(f"train_lm: warning: GPU is sm_{cc[0]}{cc[1]}, not Hopper (sm_90)")

    import torch.nn as nn
    norm_b = None
    if not args.no_quack:
        # --cpu-smoke: (b) is torch.nn.RMSNorm again, which checks that the
        # same seed gives the same losses (identical init and batches).
        norm_b = (("torch.nn.RMSNorm (stand-in)", nn.RMSNorm) if args.cpu_smoke
                  else ("quack_cpp.nn.RMSNorm", import_quack_norm()))

    meta, train, val = load_data(args.data, device)
    vocab = int(meta["vocab_size"])
    steps = args.steps
    env = dict(torch=torch.__version__, device=str(device), data=os.path.abspath(args.data),
               corpus=f"{meta.get('source_package')} {meta.get('source_version')}",
               train_tokens=int(train.numel()), val_tokens=int(val.numel()))
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
    if norm_b is not None and not args.cpu_smoke:
        env["quack_cpp"] = getattr(sys.modules.get("quack_cpp"), "__version__", "unknown")
    print(f"train_lm: {cfg['n_layers']} layers, d={cfg['d_model']}, {cfg['n_heads']} heads, "
          f"MLP {cfg['d_mlp']}, vocab {vocab}, seq {cfg['seq_len']} x batch {cfg['batch']} = "
          f"{cfg['batch'] * cfg['seq_len']} tokens/step, {steps} steps/run, "
          f"corpus {env['corpus']} ({env['train_tokens']:,} train tokens), {env.get('gpu', device)}",
          flush=True)

    plan = [("a", ("torch.nn.RMSNorm", nn.RMSNorm), 0)]
    if norm_b is not None:
        plan.append(("b", norm_b, 0))
    plan.append(("c", ("torch.nn.RMSNorm", nn.RMSNorm), 1))
    t0 = time.perf_counter()
    runs = {}
    for label, (name, cls), seed in plan:
        runs[label] = train_run(label, name, cls, seed, cfg, steps, train, val, vocab, device)
    env["total_s"] = time.perf_counter() - t0
    summary = report(runs, cfg, steps, args, env)
    print(f"train_lm: total {env['total_s']:.1f} s")
    if args.profile > 0:
        for label, (name, cls), seed in plan[:2]:
            profile_steps(label, cls, cfg, args.profile, train, vocab, device, args.out)
    if args.cpu_smoke and "b" in runs:
        assert summary["same_init"], "smoke: init differs between a and b"
        assert runs["a"]["losses"] == runs["b"]["losses"], "smoke: a and b losses differ"
        print("train_lm: cpu smoke OK (a == b exactly)")
    if "pass" in summary and not summary["pass"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
