"""`plan --calibrate`: measure the time model's parts on this GPU (a short fixed grid) → a Calibration.

Every part is timed the way the time model uses it (plan/calibration.py lists them). Device rates (GEMM,
attention, convolution, copy, decode read, the optimizer per parameter) are timed with CUDA events behind a spin
kernel (``torch.cuda._sleep``) queued first, so the host's launches are hidden and the events see the device alone.
Host floors are timed with the host clock after a synchronisation at each phase end, on models so small that the
GPU waits on the host: per layer = the median of the pairwise slopes between 1, 4 and 8 layers, timed in interleaved
rounds, for a training step's forward and backward and for ``generate()``. The earlier two-depth way (3 layers minus 1,
halved) added sampling noise: ``generate()``'s Llama per-layer cost read 0.38-0.82 ms in 16 runs of it on one CPU and
0.54-0.67 this way (benchmarks/plan-host-line_cpu_2026-12-05.md). What is left is the host's own drift: three runs of
this way back to back on one H100 host moved the training lines' per-layer costs by a median 1.28x (max 1.70x), and
15 rounds instead of 5 did not narrow it (benchmarks/plan-error_h100_2026-12-05.md). Needs
torch (and transformers for the transformer host floors, torchvision for ResNet-50's); a part whose library is
missing is left out and the time model falls back for it. Runs on the CPU too (``device="cpu"``: host clock only,
tests).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpukit.plan.calibration import CONVS, Calibration

__all__ = ["GRID", "run_calibration"]

# (M, N, K) of the GEMMs: decoder projections of 124 M … 7 B models at 128 … 32 k tokens, and an output head.
GEMMS = [(128, 768, 768), (512, 768, 3072), (2048, 1024, 1024), (2048, 4864, 896), (4096, 2048, 2048),
         (8192, 4096, 4096), (16384, 11008, 4096), (8192, 32000, 2048), (4096, 151936, 896),
         (32768, 4096, 4096)]  # fmt: skip
# (batch, heads, seq, head dim) of causal SDPA
ATTENTION = [(1, 12, 128, 64), (4, 16, 512, 64), (8, 16, 1024, 64), (4, 32, 2048, 64), (2, 32, 4096, 128)]
TINY = {
    "gpt2": {"model_type": "gpt2", "vocab_size": 256, "n_embd": 64, "n_head": 4, "n_positions": 64},
    "llama": {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "max_position_embeddings": 64},
    "qwen2": {"model_type": "qwen2", "vocab_size": 256, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "max_position_embeddings": 64,
              "tie_word_embeddings": True},
}  # fmt: skip
DECODE_DEPTHS = (1, 4, 8)  # layers of the tiny models whose generate() gives the host line per layer and token
TRAIN_DEPTHS = (1, 4, 8)  # the same for a training step's forward and backward
MODES = ("fp32", "amp", "bf16")
CKPTS = ("none", "non-reentrant", "reentrant")
GRID = {"gemm": GEMMS, "attention": ATTENTION, "conv": CONVS}


class _Timer:
    """Device seconds per call (events behind a spin kernel) on CUDA; host seconds with syncs on the CPU."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.cuda = torch, device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def device(self, fn: Callable[[], Any], reps: int = 5, warm: int = 2) -> float:
        for _ in range(warm):
            fn()
        self.sync()
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - t0) / reps
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        self.torch.cuda._sleep(20_000_000)  # ~10 ms of spin: the reps are queued behind it, launches hidden
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()  # read the events after the reps ran
        return start.elapsed_time(end) / 1e3 / reps

    def host(self, fn: Callable[[], Any], reps: int = 5, warm: int = 2) -> float:
        """Median host seconds of ``fn`` ending in a synchronisation (the GPU waits on the host at these sizes)."""
        for _ in range(warm):
            self.once(fn)
        return statistics.median(self.once(fn) for _ in range(reps))

    def once(self, fn: Callable[[], Any]) -> float:
        """Host seconds of one call of ``fn``, ending in a synchronisation."""
        t0 = time.perf_counter()
        fn()
        self.sync()  # the last kernel, before reading the clock
        return time.perf_counter() - t0


def _dt(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}[name]


def _gemm(torch: Any, tm: _Timer, dev: str, shapes: list[tuple[int, int, int]]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for name in ("bf16", "fp32"):
        rows = []
        for m, n, k in shapes:
            a = torch.randn(m, k, device=dev, dtype=_dt(torch, name))
            b = torch.randn(k, n, device=dev, dtype=_dt(torch, name))
            s = tm.device(functools.partial(torch.matmul, a, b), reps=3 if name == "fp32" else 5)
            rows.append((2.0 * m * n * k, 2.0 * m * n * k / s / 1e12))
        out[name] = sorted(rows)
    return out


def _attention(torch: Any, tm: _Timer, dev: str, shapes: list[tuple[int, int, int, int]]) -> tuple[dict, dict]:
    fwd: dict[str, list[tuple[float, float]]] = {}
    bwd: dict[str, list[tuple[float, float]]] = {}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for name in ("bf16", "fp32"):
        fr, br = [], []
        for b, a, s, d in shapes:
            q, k, v = (torch.randn(b, a, s, d, device=dev, dtype=_dt(torch, name), requires_grad=True) for _ in "qkv")
            flops = 2.0 * b * a * s * s * d  # causal forward, as compute.py counts it
            fwd_call = functools.partial(sdpa, q, k, v, is_causal=True)
            tf = tm.device(fwd_call, reps=3)
            g = torch.ones_like(fwd_call())
            tfb = tm.device(functools.partial(_backward, fwd_call, g), reps=3)
            fr.append((flops, flops / tf / 1e12))
            br.append((2.5 * flops, 2.5 * flops / max(tfb - tf, tf * 0.5) / 1e12))
        fwd[name], bwd[name] = sorted(fr), sorted(br)
    return fwd, bwd


def _backward(fn: Callable[[], Any], grad: Any) -> None:
    fn().backward(grad)


def _conv(torch: Any, tm: _Timer, dev: str, shapes: list[tuple[int, int, int, int, int, int]]
          ) -> dict[str, list[tuple[float, float]]]:  # fmt: skip
    out: dict[str, list[tuple[float, float]]] = {}
    for name in ("tf32", "bf16"):
        rows = []
        for n, c, size, oc, k, stride in shapes:
            conv = torch.nn.Conv2d(c, oc, k, stride, padding=k // 2, bias=False).to(dev, _dt(torch, name))
            x = torch.randn(n, c, size, size, device=dev, dtype=_dt(torch, name), requires_grad=True)
            y = conv(x)
            g = torch.ones_like(y)
            fwd = 2.0 * n * oc * y.shape[2] * y.shape[3] * c * k * k
            t = tm.device(functools.partial(_backward, functools.partial(conv, x), g), reps=3)
            rows.append((fwd, 3 * fwd / t / 1e12))  # forward + backward at 3 × the forward's FLOPs
        out[name] = sorted(rows)
    return out


def _bandwidth(torch: Any, tm: _Timer, dev: str, mib: int) -> tuple[float, float]:
    n = mib * 2**20 // 4
    src, dst = torch.empty(n, device=dev), torch.empty(n, device=dev)
    copy = 2 * n * 4 / tm.device(functools.partial(dst.copy_, src)) / 1e9
    del src, dst
    ws = [torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) for _ in range(max(1, mib // 32))]
    x = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)

    def read_all() -> None:
        for w in ws:
            x @ w

    read = len(ws) * 4096 * 4096 * 2 / tm.device(read_all, reps=3) / 1e9
    return copy, read


def _launch(torch: Any, tm: _Timer, dev: str) -> float:
    x = torch.zeros(16, device=dev)
    tm.sync()
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1.0)
    host = (time.perf_counter() - t0) / 2000
    tm.sync()
    return host


def _optimizers(torch: Any, tm: _Timer, dev: str, big: int, few: int = 32, many: int = 256
                ) -> dict[str, dict[str, dict[str, float]]]:  # fmt: skip
    """AdamW per implementation and dtype: host line from ``few`` and ``many`` small tensors, device seconds per
    parameter from 16 tensors of ``big`` elements."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for impl in ("foreach", "fused", "for-loop"):
        out[impl] = {}
        for name in ("fp32", "bf16"):
            row: dict[str, float] = {}
            times: dict[str, float] = {}
            for count, numel in ((few, 4096), (many, 4096), (16, big)):
                ps = [torch.nn.Parameter(torch.randn(numel, device=dev, dtype=_dt(torch, name))) for _ in range(count)]
                for p in ps:
                    p.grad = torch.randn_like(p)
                opt = torch.optim.AdamW(ps, lr=1e-5, foreach=impl == "foreach", fused=impl == "fused")
                if count == 16:
                    times["big"] = tm.device(opt.step, reps=3)
                else:
                    times[str(count)] = tm.host(opt.step)
                del opt, ps
            row["s_per_tensor"] = max(0.0, (times[str(many)] - times[str(few)]) / (many - few))
            row["fixed_s"] = max(0.0, times[str(few)] - few * row["s_per_tensor"])
            row["s_per_param"] = times["big"] / (16 * big)
            out[impl][name] = row
    return out


def _fit(points: dict[int, float]) -> tuple[float, float]:
    """(fixed, per layer) seconds through {layers: seconds}: the median of the pairwise slopes and of the
    intercepts (Theil-Sen; exact on a line, the two-point line for two depths); noise never makes a negative cost."""
    slopes = [(points[b] - points[a]) / (b - a) for a, b in itertools.combinations(sorted(points), 2)]
    per = max(0.0, statistics.median(slopes))
    return max(0.0, statistics.median(t - per * n for n, t in points.items())), per


def _tiny(torch: Any, family: str, layers: int, dtype: Any, dev: str, ckpt: str, use_cache: bool,
          positions: int | None = None) -> Any:  # fmt: skip
    """A ``TINY[family]`` model of ``layers`` layers; ``positions``: a longer context than TINY's 64."""
    import transformers

    cfg: dict[str, Any] = dict(TINY[family])
    kind = str(cfg.pop("model_type"))
    cfg["n_layer" if kind == "gpt2" else "num_hidden_layers"] = layers
    if positions is not None:
        cfg["n_positions" if kind == "gpt2" else "max_position_embeddings"] = positions
    config = transformers.AutoConfig.for_model(kind, **cfg)
    config.use_cache = use_cache
    with torch.device(dev):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    if ckpt != "none":
        from gpukit.plan.measure import enable_checkpointing

        enable_checkpointing(model, ckpt)
    return model.to(dev)


def _host_train(torch: Any, tm: _Timer, dev: str, quick: bool, rounds: int = 5, warm: int = 2
                ) -> dict[str, dict[str, tuple[float, float]]]:  # fmt: skip
    """Per family, precision mode and checkpointing: one training step of tiny models of ``TRAIN_DEPTHS`` layers,
    every depth once a round (as ``_host_decode``), the median of ``rounds`` per depth and phase, and the line
    through them."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for family in ("llama",) if quick else TINY:
        for mode in ("fp32",) if quick else MODES:
            for ckpt in CKPTS[::2] if quick else CKPTS:
                dtype = torch.bfloat16 if mode == "bf16" else torch.float32
                models = {n: _tiny(torch, family, n, dtype, dev, ckpt, use_cache=False).train() for n in TRAIN_DEPTHS}
                ids = torch.randint(0, 256, (1, 16), device=dev)
                amp = torch.autocast(dev, dtype=torch.bfloat16) if mode == "amp" else contextlib.nullcontext()
                out[f"{family}|{mode}|{ckpt}"] = _phase_lines(_depth_medians(tm, models, ids, amp, rounds, warm))
    return out


def _depth_medians(tm: _Timer, models: dict[int, Any], ids: Any, amp: Any, rounds: int, warm: int
                   ) -> dict[int, tuple[float, float]]:  # fmt: skip
    """{layers: (forward, backward) median seconds}: one step of each depth's model a round, in turn."""
    t: dict[int, list[tuple[float, float]]] = {n: [] for n in models}
    for r in range(warm + rounds):  # the first rounds warm up (allocator, kernel choice)
        for n, model in models.items():
            step = _train_step(tm, model, ids, amp)
            if r >= warm:
                t[n].append(step)
    return {n: (statistics.median(s[0] for s in v), statistics.median(s[1] for s in v)) for n, v in t.items()}


def _phase_lines(medians: dict[int, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """The forward's and the backward's line through the per-depth medians."""
    return {ph: _fit({n: m[k] for n, m in medians.items()}) for k, ph in enumerate(("forward", "backward"))}


def _train_step(tm: _Timer, model: Any, ids: Any, amp: Any) -> tuple[float, float]:
    """(forward, backward) seconds of one step, each up to its last kernel."""
    tm.sync()
    t0 = time.perf_counter()
    with amp:
        loss = model(input_ids=ids, labels=ids).loss
    tm.sync()
    t1 = time.perf_counter()
    loss.backward()
    tm.sync()  # the backward's last kernel, before reading the clock
    t2 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1


def _host_decode(torch: Any, tm: _Timer, dev: str, quick: bool, rounds: int = 5, warm: int = 2
                 ) -> dict[str, dict[str, tuple[float, float]]]:  # fmt: skip
    """Per family: generate() of 1 and of 17 tokens after a 16-token prompt on tiny models of ``DECODE_DEPTHS``
    layers, every depth once a round (a burst of host noise lands on all depths alike, not on one), the median of
    ``rounds`` per depth; prefill = the 1-token call, a token = the 16 more tokens' share."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    kw = {"do_sample": False, "use_cache": True, "pad_token_id": 0, "eos_token_id": None}
    for family in ("llama",) if quick else TINY:
        models = {n: _tiny(torch, family, n, torch.bfloat16, dev, "none", use_cache=True).eval() for n in DECODE_DEPTHS}
        ids = torch.randint(0, 256, (1, 16), device=dev)
        one: dict[int, list[float]] = {n: [] for n in models}
        token: dict[int, list[float]] = {n: [] for n in models}
        with torch.inference_mode():
            for r in range(warm + rounds):
                for n, model in models.items():
                    t1 = tm.once(functools.partial(model.generate, ids, max_new_tokens=1, min_new_tokens=1, **kw))
                    t17 = tm.once(functools.partial(model.generate, ids, max_new_tokens=17, min_new_tokens=17, **kw))
                    if r >= warm:
                        one[n].append(t1)
                        token[n].append((t17 - t1) / 16)
        out[family] = {
            "prefill": _fit({n: statistics.median(v) for n, v in one.items()}),
            "token": _fit({n: statistics.median(v) for n, v in token.items()}),
        }
    return out


def _cnn_loss(net: Any, x: Any, amp: Any) -> Any:
    with amp:
        return net(x).float().sum()


def _host_cnn(torch: Any, tm: _Timer, dev: str, quick: bool) -> dict[str, dict[str, float]]:
    from gpukit.train.models import seed_cnn

    builders: dict[str, Callable[[], Any]] = {"seed-cnn": lambda: seed_cnn(64, 2)}
    with contextlib.suppress(ImportError):
        if quick:
            raise ImportError  # the quick grid leaves ResNet-50 out
        import torchvision

        builders["resnet50"] = lambda: torchvision.models.resnet50()
    out: dict[str, dict[str, float]] = {}
    for name, build in builders.items():
        for mode in ("fp32",) if quick else MODES:
            dtype = torch.bfloat16 if mode == "bf16" else torch.float32
            net = build().to(dev, dtype)
            x = torch.randn(1, 3, 64 if name == "seed-cnn" else 224, 64 if name == "seed-cnn" else 224,
                            device=dev, dtype=dtype)  # fmt: skip
            amp = torch.autocast(dev, dtype=torch.bfloat16) if mode == "amp" else contextlib.nullcontext()

            fwd = functools.partial(_cnn_loss, net, x, amp)
            f = tm.host(fwd)
            fb = tm.host(functools.partial(_backward, fwd, None))
            out[f"{name}|{mode}"] = {"forward": f, "backward": max(0.0, fb - f)}
    return out


def run_calibration(device: str = "cuda", quick: bool = False, progress: Callable[[str], None] | None = None
                    ) -> Calibration:  # fmt: skip
    """Measure every part on ``device``; ``quick`` shrinks the grid (tests, the CPU). A part that fails (a library
    missing, a kernel this GPU lacks) is left out, its error kept in ``meta["errors"]``: the time model then falls
    back for that part alone. The bandwidth and the GEMMs are needed: their failure raises."""
    import torch

    from gpukit.hardware.specs import match_spec

    tm = _Timer(torch, device)
    say = progress or (lambda _msg: None)
    # quick: the CPU and the tests — the same code on shapes small enough for a shared 2-core runner
    quick_grid = ([(64, 64, 64), (128, 128, 128)], [(1, 2, 32, 16)], [(2, 3, 16, 8, 3, 1)])
    gemms, attn, convs = quick_grid if quick else (GEMMS, ATTENTION, CONVS)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    spec = match_spec(name)
    errors: dict[str, str] = {}

    def part(what: str, fn: Callable[[], Any], default: Any) -> Any:
        say(what)
        try:
            return fn()
        except Exception as exc:  # one part must not lose the others
            errors[what] = f"{type(exc).__name__}: {str(exc)[:200]}"
            return default

    copy, read = _bandwidth(torch, tm, device, 8 if quick else 512)
    gemm = _gemm(torch, tm, device, gemms)
    fwd, bwd = part("attention", lambda: _attention(torch, tm, device, attn), ({}, {}))
    conv = part("conv", lambda: _conv(torch, tm, device, convs), {})
    sizes = (1024, 4, 12) if quick else (16 * 2**20, 32, 256)
    optim = part("optimizer", lambda: _optimizers(torch, tm, device, *sizes), {})
    host = part("host floor, training", lambda: _host_train(torch, tm, device, quick, *((2, 1) if quick else ())), {})
    decode = part("host floor, generate()", lambda: _host_decode(torch, tm, device, quick), {})
    cnn = part("host floor, CNNs", lambda: _host_cnn(torch, tm, device, quick), {})
    meta: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "torch": torch.__version__,
                            "device": device, "quick": quick, "errors": errors}  # fmt: skip
    with contextlib.suppress(ImportError):
        import transformers

        meta["transformers"] = transformers.__version__
    return Calibration(
        gpu_name=name, gpu_key=spec.key if spec else name.lower().replace(" ", "-"), source="calibrated now",
        bandwidth_gbps=copy, decode_gbps=read, launch_s=_launch(torch, tm, device), gemm=gemm, attention_fwd=fwd,
        attention_bwd=bwd, conv=conv, optimizer=optim, host=host, host_decode=decode, host_cnn=cnn, meta=meta,
    )  # fmt: skip
