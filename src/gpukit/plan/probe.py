"""`plan --probe-host`: the host floor of this very configuration, timed on this machine in a few seconds.

The calibration prices a transformer's host per layer from tiny models of 1, 4 and 8 layers (plan/calibrate.py),
measured once and extrapolated to the real depth. The probe times the configuration itself instead: the same model with
its widths shrunk (4 heads of its own head size, a 256-entry vocabulary; the same layers, norms, biases, attention kind,
checkpointing variant, precision mode and optimizer), at the plan's batch and sequence, so that the GPU has almost
nothing to do and each phase's time is the host's. On 46 held-out training configurations measured on four H100 hosts on
2026-12-05, it took the step time's error from p50 10.9 % / p90 23.3 % / max 53.4 % (the calibration's line) to 8.0 /
19.8 / 44.9 % (benchmarks/plan-probe_h100_2026-12-05.md). It is not closer on every host: on the last clean set (9 rows)
it read 4.7 / 22.8 / 44.9 % against the calibration's 3.8 / 17.0 / 18.7 %. What it cannot remove is the host's own
noise: two probes of one configuration a minute apart differed by up to 45 %. For ``generate()`` it read no closer than
the calibration (p50 39 % against 21 % on 10 rows), so ``plan --probe-host`` times training steps only. A CNN's host
floor is not probed: the calibration times the CNN presets themselves, and at batch 1 the probe read worse than it (p50
23 % against 9 %).

Needs torch, transformers and a CUDA GPU (or ``device="cpu"``: tests).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import replace
from typing import Any

from gpukit.errors import BackendUnavailable, PlanError
from gpukit.plan.memory import PlanSettings
from gpukit.plan.models import ModelSpec, TransformerSpec

__all__ = ["local_gpu_key", "probe_host", "shrink"]

HEADS, VOCAB = 4, 256


def shrink(model: TransformerSpec, positions: int, head_dim: int | None = None) -> TransformerSpec:
    """``model`` with 4 attention heads of its own head size (``head_dim`` to choose another; the attention kernel
    chosen depends on it), its grouped-query sharing kept where it has one, an MLP twice as wide as the attention,
    a 256-entry vocabulary and room for ``positions`` tokens: the same layers and structure, a few percent of the
    width."""
    d = head_dim or model.head_dim
    width = HEADS * d
    kv = HEADS if model.num_kv_heads >= model.num_heads else (1 if model.num_kv_heads == 1 else 2)
    cfg = dict(model.hf_config)
    if cfg.get("model_type") == "gpt2":
        cfg.update(n_embd=width, n_head=HEADS, n_inner=2 * width, vocab_size=VOCAB, n_positions=max(positions, 64))
    else:
        cfg.update(hidden_size=width, num_attention_heads=HEADS, num_key_value_heads=kv, head_dim=d,
                   intermediate_size=2 * width, vocab_size=VOCAB,
                   max_position_embeddings=max(positions, int(cfg.get("max_position_embeddings", 0) or 0)))  # fmt: skip
        for key in ("moe_intermediate_size", "shared_expert_intermediate_size"):
            if key in cfg:
                cfg[key] = 2 * width
        cfg.pop("rope_scaling", None)  # scaled RoPE is defined for the real model
    cfg.update(bos_token_id=0, eos_token_id=0, pad_token_id=0)  # inside the shrunk vocabulary
    return replace(model, vocab_size=VOCAB, hidden_size=width, num_heads=HEADS, num_kv_heads=kv, head_dim=d,
                   intermediate_size=2 * width, hf_config=cfg)  # fmt: skip


def probe_host(model: ModelSpec, s: PlanSettings, device: str = "cuda", reps: int = 5, warm: int = 2,
               head_dim: int | None = None) -> dict[str, float]:  # fmt: skip
    """Host seconds per phase of ``model`` under ``s`` on this machine: training {forward, backward, optimizer},
    generation {prefill, decode_token}; each the median of ``reps`` after ``warm``, each phase ending in a
    synchronisation (see the module's docstring)."""
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable("--probe-host needs PyTorch", hint="pip install 'gpukit[torch]'") from exc
    if device == "cuda" and not torch.cuda.is_available():
        raise PlanError("--probe-host times this machine's host with its GPU, and PyTorch sees no CUDA GPU",
                        hint="run it on the machine with the GPU, or leave --probe-host out")  # fmt: skip
    if s.gpus > 1 or s.tp > 1:
        raise PlanError("--probe-host times one GPU's host", hint="drop --gpus/--tp, or leave --probe-host out")
    if not isinstance(model, TransformerSpec) and model.family != "cnn":
        raise PlanError("--probe-host needs a model it can build", hint="give a preset or a config.json, not --params")
    if not isinstance(model, TransformerSpec):
        raise PlanError("--probe-host times a transformer's host floor; a CNN's is the calibration's",
                        hint="leave --probe-host out: plan --calibrate times the CNN presets themselves")  # fmt: skip
    if s.task == "train":
        return _train(torch, shrink(model, s.seq, head_dim), s, device, reps, warm)
    return _generate(torch, shrink(model, s.prompt + s.new_tokens, head_dim), s, device, reps, warm)


def local_gpu_key() -> str | None:
    """This machine's GPU as a catalog key (the headline GPU of a probed plan), or None: no CUDA GPU (the probe says
    so), or one with no row."""
    try:
        import torch
    except ImportError:
        return None
    from gpukit.hardware.specs import match_spec

    if not torch.cuda.is_available():
        return None
    local = match_spec(torch.cuda.get_device_name())
    return local.key if local else None


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _train(torch: Any, model: TransformerSpec, s: PlanSettings, device: str, reps: int, warm: int
           ) -> dict[str, float]:  # fmt: skip
    from gpukit.plan import measure as m

    module = m.build_module(model, s, device).train()
    opt = m._optimizer(torch, module.parameters(), s.optimizer, s.optimizer_impl)
    x = torch.randint(0, model.vocab_size, (s.batch, s.seq), device=device)
    amp = torch.autocast(device, dtype=torch.bfloat16) if s.recipe == "amp-bf16" else contextlib.nullcontext()
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
    for r in range(warm + reps):
        _sync(torch, device)
        t0 = time.perf_counter()
        with amp:
            loss, _ = m._loss(torch, module, model, x, x)
        _sync(torch, device)
        t1 = time.perf_counter()
        loss.backward()
        _sync(torch, device)
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(torch, device)
        t3 = time.perf_counter()
        if r >= warm:
            for name, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                times[name].append(dt)
    return {name: statistics.median(v) for name, v in times.items()}


def _generate(torch: Any, model: TransformerSpec, s: PlanSettings, device: str, reps: int, warm: int
              ) -> dict[str, float]:  # fmt: skip
    """prefill = a 1-token generate(); a token = the share of each of up to 8 more (the calibration takes 16)."""
    from gpukit.plan import measure as m

    module = m.build_module(model, s, device).eval()
    ids = torch.randint(0, model.vocab_size, (s.batch, s.prompt), device=device)
    kw = {"do_sample": False, "use_cache": True, "pad_token_id": 0, "eos_token_id": None}
    n = max(2, min(s.new_tokens, 9))

    def once(tokens: int) -> float:
        _sync(torch, device)
        t0 = time.perf_counter()
        module.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **kw)
        _sync(torch, device)
        return time.perf_counter() - t0

    one: list[float] = []
    token: list[float] = []
    with torch.inference_mode():
        for r in range(warm + reps):
            t1, tn = once(1), once(n)
            if r >= warm:
                one.append(t1)
                token.append(max(0.0, tn - t1) / (n - 1))
    return {"prefill": statistics.median(one), "decode_token": statistics.median(token)}
