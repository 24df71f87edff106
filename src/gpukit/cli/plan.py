"""`gpukit plan`: GPU memory, time and cost for a model — and `--measure` to check the prediction on this GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpukit.cli import render
from gpukit.cli.history import db_option

HELP = (
    "Plan GPU memory, time and cost for MODEL (a preset, a Hugging Face config.json, or --params 7B). "
    "With --measure, run it on this machine's GPU and print predicted vs measured."
)
BAR_WIDTH = 20


def _bar(part: float, total: float) -> str:
    n = round(BAR_WIDTH * part / total) if total > 0 else 0
    return "█" * n + "·" * (BAR_WIDTH - n)


def _memory_table(d: dict[str, Any]) -> Any:
    total = d["total_bytes"]
    names = (
        "weights",
        "gradients",
        "master",
        "optimizer",
        "activations",
        "logits",
        "kv_cache",
        "workspace",
        "overhead",
    )
    rows = [
        (
            n.replace("_", " "),
            render.fmt_bytes(d[f"{n}_bytes"]),
            f"{d[f'{n}_bytes'] / total:6.1%}",
            _bar(d[f"{n}_bytes"], total),
        )
        for n in names
        if d[f"{n}_bytes"]
    ]
    rows.append(("total per GPU", render.fmt_bytes(total), "100.0%", ""))
    rows.append(("  of it allocated by PyTorch (peak)", render.fmt_bytes(d["peak_allocated_bytes"]), "", ""))
    return render.table(("component", "bytes", "share", ""), rows, title="memory per GPU", justify="lrrl")


def _fits_table(d: dict[str, Any]) -> Any:
    rows = []
    assumed = False
    t = d["time"]
    for f in d["fits"]:
        fewest = "—" if f["fewest_gpus"] is None else f"{f['fewest_gpus']} ({f['fewest_gpus_layout']})"
        if (
            f["gpu"] == t["gpu"]
            and not t.get("as_asked", True)
            and t.get("layout") not in ("", f["fewest_gpus_layout"])
        ):
            fewest = fewest[:-1] + f", or {t['layout']}: timed below)"  # the headline's layout, named the same
        mark = "*" if f.get("memory_source", "").startswith("assumed") else ""
        assumed = assumed or bool(mark)
        rows.append((f["name"], render.fmt_bytes(f["memory_bytes"]) + mark, "yes" if f["fits"] else "no", fewest))
    title = "which GPUs fit (memory: the driver's total where sourced"
    title += "; * assumed from the datasheet GB × 10⁹, about 7 % under a real HBM part's)" if assumed else ")"
    return render.table(
        ("GPU (datasheet)", "memory", "fits as asked", "fewest GPUs that fit"), rows, title=title, justify="lrll"
    )


def _rate(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:,.0f} {unit}"


def _time_lines(d: dict[str, Any]) -> list[str]:
    t = d["time"]
    if not t.get("fits", True):
        return [f"time on {t['gpu']}: none — no layout of up to 512 GPUs fits its memory (see the fit table)"]
    timed = t.get("step_s") is not None or t.get("per_token_s") is not None
    how = "the fastest layout of the fewest GPUs that fit" if timed else "on the fewest GPUs that fit"
    where = t["gpu"] if t.get("as_asked", True) else f"{t['gpu']}, {t['layout']} (as asked it does not fit: {how})"
    mfu = "n/a" if t["mfu"] is None else f"{t['mfu']:.1%}"
    if t["task"] == "train" and t["step_s"] is None:
        return [f"time on {where}: n/a — a bare --params count has no FLOPs model; give a preset or config.json"]
    if t["task"] == "train":
        lines = [
            f"time on {where}: {render.fmt_seconds(t['step_s'])} per step, "
            f"{_rate(t['tokens_per_s'], t['work_unit'])}/s, MFU {mfu} of datasheet peak ({t['ceilings_source']})"
        ]
        if t["total_s"] is not None:
            lines.append(
                f"  {t['work']:,.0f} {t['work_unit']} = {t['steps']:,} steps ≈ {render.fmt_seconds(t['total_s'])}"
                f" ({t['total_s'] / 3600:,.2f} h)"
            )
        return lines
    if d["model"]["kind"] != "transformer":
        return [f"time on {where}: one pass reading the weights ≥ {render.fmt_seconds(t['per_token_s'])}"]
    return [
        f"time on {where}: prefill {render.fmt_seconds(t['prefill_s'])}, "
        f"{render.fmt_seconds(t['per_token_s'])} per decode step with eager transformers generate() → "
        f"{_rate(t['tokens_per_s'], 'tokens/s')}; bandwidth bound "
        f"{_rate(t['bandwidth_bound_tokens_per_s'], 'tokens/s')} ({t['ceilings_source']})"
    ]


_CALIBRATION = {"shipped": "gpukit's shipped calibration", "calibrated": "a calibration made on the machine"}


def _accuracy_lines(d: dict[str, Any]) -> list[str]:
    """How far such a time was off when measured (plan.calibration.time_accuracy), so that it is read with its error."""
    t = d.get("time", {})
    a = t.get("accuracy") or {}
    what = "step time" if t.get("task") == "train" else "warm generate() time"
    several = d.get("settings", {}).get("gpus", 1) > 1
    if a.get("probed"):
        return [
            f"  measured accuracy: {what} with the host floor probed on the machine was off by {a['p50']:.0%} at the "
            f"median, {a['p90']:.0%} at p90 and {a['max']:.0%} at worst on {a['n']} held-out transformer "
            f"configurations on {a['hosts']} {a['gpu']} hosts (docs/plan.md)"
        ]
    if a.get("n"):
        line = (
            f"  measured accuracy: {what} was off by {a['p50']:.0%} at the median, {a['p90']:.0%} at p90 and "
            f"{a['max']:.0%} at worst on {a['n']} held-out one-GPU {a['gpu']} configurations with "
            f"{_CALIBRATION[a['calibration']]}"
        )
        if (w := a.get("with_calibration")) and w.get("n"):
            line += f"; with one made there by `gpukit plan --calibrate`: p90 {w['p90']:.0%} ({w['n']})"
        return [line + (" — this layout's several GPUs were not measured" if several else "") + " (docs/plan.md)"]
    if ref := a.get("reference"):
        return [
            f"  measured accuracy: none for this GPU with {a['calibration']} rates; for scale, the {a['gpu']} with "
            f"gpukit's shipped calibration: p90 {ref['p90']:.0%} on {ref['n']} held-out configurations (docs/plan.md)"
        ]
    return []


def _phase_lines(d: dict[str, Any]) -> list[str]:
    """One line: each phase's predicted time and the bound it hits (the time model's parts, compute.py)."""
    phases = d.get("time", {}).get("phases") or []
    if not phases:
        return []
    parts = [f"{p['name'].replace('_', ' ')} {render.fmt_seconds(p['total_s'])} ({p['bound']}-bound)" for p in phases]
    lines = ["  per phase: " + ", ".join(parts)]
    host = sum(p["total_s"] for p in phases if p["bound"] == "host")
    if host > 0.5 * sum(p["total_s"] for p in phases):
        lines.append(
            "  host-bound: most of this time is the CPU launching kernels (Python, dispatch), not the GPU, so it "
            "follows this host's CPU (the same steps took 0.9-1.9x as long on two hosts of one GPU model, "
            "docs/plan.md); a larger batch, CUDA graphs or torch.compile shorten it"
        )
    return lines


def _cost_table(d: dict[str, Any]) -> Any:
    rows = []
    for c in d["cost"]:
        gpus = f"{c['gpus']}× {c['gpu']}"
        if not c["fits"]:
            rows.append((c["instance"], gpus, f"${c['usd_per_hour']:,.3f}", "does not fit", "", "", ""))
            continue
        hours = "n/a" if c["time_s"] is None else render.fmt_seconds(c["time_s"])
        usd = "n/a" if c["usd"] is None else f"${c['usd']:,.2f}"
        per_m = "n/a" if c["usd_per_million"] is None else f"${c['usd_per_million']:,.4f}"
        rows.append((c["instance"], gpus, f"${c['usd_per_hour']:,.3f}", c["layout"], hours, usd, per_m))
    unit = "M tokens" if d["time"]["work_unit"] == "tokens" else "M samples"
    if d["settings"]["task"] == "infer":
        unit = "M tokens, bandwidth bound"
    return render.table(
        ("instance", "GPUs", "$/h", "layout", "time", "cost", f"$/{unit}"),
        rows,
        title="cost, cheapest first (AWS on-demand, us-east-1)",
        justify="llrlrrr",
    )


def _price_notes(d: dict[str, Any]) -> list[str]:
    dates = sorted({c["as_of"] for c in d["cost"]})
    notes = [f"prices as of: {'; '.join(dates)} — override with --prices FILE"]
    notes += [f"{c['instance']}: {c['note']}" for c in d["cost"] if c["note"]]
    return notes


def _print_plan(d: dict[str, Any]) -> None:
    m, s = d["model"], d["settings"]
    what = (
        f"train, {s['recipe']}, {s['optimizer']}"
        + (f" ({s['optimizer_impl']})" if s["optimizer"] in ("adam", "adamw") else "")
        + f", batch {s['batch']}"
        + (f" × seq {s['seq']}" if m["kind"] == "transformer" else "")
        + (f" at {m['image_size']}×{m['image_size']}" if m.get("image_size") else "")
        + (", checkpointing" if s["checkpointing"] else "")
        + (f", {s['gpus']} GPUs {s['shard']}" if s["gpus"] > 1 else ", 1 GPU")
        + (f", tp {s['tp']}" if s["tp"] > 1 else "")
        if s["task"] == "train"
        else f"infer, {s['dtype']} weights, KV {s['kv_dtype']}, batch {s['batch']}, {s['prompt']} + {s['new_tokens']}"
        " tokens"
    )
    # A bare --params count is named by its count: print it once ("7,000,000,000 parameters"), not twice.
    name = "bare count (--params)" if m.get("family") == "params-only" else m["name"]
    render.console.print(
        f"[bold]{render.escape(name)}[/] — {d['params']:,} parameters — {render.escape(what)}", markup=True
    )
    render.console.print(_memory_table(d))
    for note in d["memory_notes"]:
        render.console.print(f"  note: {note}")
    render.console.print(_fits_table(d))
    for line in _time_lines(d) + _phase_lines(d) + _accuracy_lines(d):
        render.console.print(line)
    render.console.print(_cost_table(d))
    if hint := _cost_hint(d):
        render.console.print(f"  [yellow]hint:[/] {render.escape(hint)}")
    for note in _price_notes(d):
        render.console.print(f"  {note}")


def _cost_hint(d: dict[str, Any]) -> str | None:
    """Why the cost table's time and cost columns are n/a, and the option that fills them."""
    if d["settings"]["task"] != "train" or d["time"].get("work") is not None or d["time"].get("step_s") is None:
        return None  # inference, a run size given, or no time per step to multiply (a bare --params count)
    if not any(c["fits"] for c in d["cost"]):
        return None
    if d["model"].get("kind") == "transformer":
        return "time and cost are per run: give the run's size with --tokens (e.g. --tokens 2B) to fill them"
    return "time and cost are per run: give the run's size with --samples (e.g. --samples 1M) to fill them"


def _print_measure(c: dict[str, Any]) -> None:
    rows = [(k, v["predicted"], v["measured"], v["error"]) for k, v in c["rows"].items()]
    render.console.print(
        render.table(
            ("on " + c["device"], "predicted", "measured", "error"), rows, title="predicted vs measured", justify="lrrr"
        )
    )
    if c.get("phases"):
        render.console.print(_phase_table(c["phases"]))
    cold = c.get("measured", {}).get("cold_generate_s")
    if cold is not None:
        render.console.print(
            f"first generate() on these shapes (cold, set-up; not predicted): {render.fmt_seconds(cold)}"
        )
    if c.get("calibration"):
        render.console.print(f"time model: {render.escape(c['calibration'])}")
    render.console.print(f"stored in {c['db']}")


def _phase_table(phases: list[dict[str, Any]]) -> Any:
    def s(v: float | None) -> str:
        return "n/a" if v is None else render.fmt_seconds(v)

    def err(p: float | None, m: float | None) -> str:
        return "n/a" if not p or not m else f"{p / m - 1:+.1%}"

    rows = [
        (
            r["phase"].replace("_", " "),
            r["bound"] or "n/a",
            f"{s(r['predicted_s'])} / {s(r['measured_s'])}",
            err(r["predicted_s"], r["measured_s"]),
            f"{s(r['predicted_gpu_s'])} / {s(r['measured_device_s'])}",
            f"{s(r['predicted_host_s'])} / {s(r['measured_host_s'])}",
        )
        for r in phases
    ]
    return render.table(
        ("phase", "bound", "time pred / meas", "error", "GPU pred / device busy", "host pred / meas"),
        rows,
        title="per phase (measured: CUDA events; device and host: torch profiler)",
        justify="llrrrr",
    )


def _compare(d: dict[str, Any], meas: Any, pred_time: float | None) -> dict[str, Any]:
    def err(p: float | None, m: float | None) -> str:
        return "n/a" if not p or not m else f"{p / m - 1:+.1%}"

    meas_time = meas.step_s if meas.step_s is not None else meas.generate_s
    return {
        "device": meas.device_name,
        "rows": {
            "peak allocated": {
                "predicted": render.fmt_bytes(d["peak_allocated_bytes"]),
                "measured": render.fmt_bytes(meas.peak_allocated_bytes),
                "error": err(d["peak_allocated_bytes"], meas.peak_allocated_bytes),
            },
            "peak reserved": {
                "predicted": render.fmt_bytes(d["reserved_bytes"]),
                "measured": render.fmt_bytes(meas.peak_reserved_bytes),
                "error": err(d["reserved_bytes"], meas.peak_reserved_bytes),
            },
            "step time" if meas.step_s is not None else "generate time": {
                "predicted": render.fmt_seconds(pred_time),
                "measured": render.fmt_seconds(meas_time),
                "error": err(pred_time, meas_time),
            },
        },
        "predicted_time_s": pred_time,
        "measured_time_s": meas_time,
    }


def register(app: typer.Typer) -> None:
    @app.command("plan", help=HELP)
    def plan(
        model: str = typer.Argument(
            None, help="Preset (gpukit plan --list), path to config.json, or omit with --params."
        ),
        params: str = typer.Option(None, "--params", help="Bare parameter count, e.g. 7B (model states only)."),
        task: str = typer.Option("train", "--task", help="train | infer"),
        recipe: str = typer.Option("amp-bf16", "--recipe", help="fp32 | amp-bf16 | bf16-master | bf16"),
        optimizer: str = typer.Option("adamw", "--optimizer", help="adamw | adam | sgd | adafactor | adam8bit"),
        optimizer_impl: str = typer.Option(
            "foreach",
            "--optimizer-impl",
            help="Adam(W) code path: foreach (PyTorch's default; a temporary the size of one moment) | fused | "
            "for-loop.",
        ),
        image_size: int = typer.Option(
            None, "--image-size", help="CNN input resolution (pixels per side); default: the preset's (224, 64)."
        ),
        batch: int = typer.Option(1, "--batch", help="Micro-batch per GPU (sequences or images)."),
        seq: int | None = typer.Option(
            None, "--seq", help="Training sequence length (default: 2048, or the model's positions where fewer)."
        ),
        checkpointing: bool = typer.Option(False, "--checkpointing", help="Activation checkpointing per layer."),
        checkpointing_variant: str = typer.Option(
            "non-reentrant",
            "--checkpointing-variant",
            help="With --checkpointing: non-reentrant (use_reentrant=False, Hugging Face's default in transformers 5) "
            "| reentrant (use_reentrant=True, transformers 4.x's default).",
        ),
        gpus: int = typer.Option(1, "--gpus", help="GPUs in total."),
        shard: str = typer.Option("ddp", "--shard", help="ddp | zero1 | zero2 | zero3 | fsdp"),
        tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree (divides heads)."),
        attn: str = typer.Option("sdpa", "--attn", help="sdpa | eager (eager keeps the attention matrix)."),
        dtype: str = typer.Option("bf16", "--dtype", help="Inference weights: bf16 | fp16 | fp8 | int8 | int4"),
        prompt: int = typer.Option(512, "--prompt", help="Inference prompt tokens."),
        new_tokens: int = typer.Option(128, "--new-tokens", help="Tokens to generate."),
        kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV cache: bf16 | fp16 | fp8 | int8 | fp32"),
        tokens: str = typer.Option(None, "--tokens", help="Train on this many tokens (e.g. 2B) for time and cost."),
        samples: str = typer.Option(None, "--samples", help="Train on this many samples (CNNs)."),
        gpu: str | None = typer.Option(None, "--gpu", help="GPU for the headline time (catalog key, e.g. h100-sxm)."),
        prices: Path = typer.Option(None, "--prices", help="TOML file overriding/extending the price catalog."),
        db: str = db_option(),
        measure: bool = typer.Option(False, "--measure", help="Run it on this GPU: predicted vs measured, per phase."),
        calibrate: bool = typer.Option(
            False, "--calibrate", help="Measure the time model's parts on this GPU (a few minutes) and save them."
        ),
        calibration: Path = typer.Option(
            None,
            "--calibration",
            help="Calibration file to use (or, with --calibrate, to write); default: the one saved for the GPU.",
        ),
        probe_host: bool = typer.Option(
            False,
            "--probe-host",
            help="First time this configuration's host floor on this machine (seconds: the model with its widths "
            "shrunk, on this GPU) and use it in place of the calibration's.",
        ),
        list_presets: bool = typer.Option(False, "--list", help="List the model presets and exit."),
        json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    ) -> int:
        from gpukit.plan import advisor
        from gpukit.plan import measure as measuring
        from gpukit.plan.memory import PlanSettings, default_seq
        from gpukit.plan.models import load_model, preset_names

        if list_presets:
            render.print_json(preset_names()) if json_out else render.console.print("\n".join(preset_names()))
            return 0
        if calibrate:
            return _run_calibrate(calibration, json_out)
        from gpukit.plan.calibration import load_calibration

        cal = load_calibration(calibration) if calibration is not None else None
        spec = load_model(model, params)
        if image_size is not None:
            from gpukit.plan.cnn_count import at_image_size

            spec = at_image_size(spec, image_size)
        settings = PlanSettings(
            task=task,
            recipe=recipe,
            optimizer=optimizer,
            optimizer_impl=optimizer_impl,
            batch=batch,
            seq=seq if seq is not None else default_seq(spec),
            checkpointing=checkpointing,
            checkpoint_variant=checkpointing_variant,
            gpus=gpus,
            shard=shard,
            tp=tp,
            attn=attn,
            dtype=dtype,
            prompt=prompt,
            new_tokens=new_tokens,
            kv_dtype=kv_dtype,
        )
        work = _work(spec, tokens, samples)
        measured = measuring.load_ceilings(db)
        host = None
        if probe_host:
            from gpukit.errors import PlanError
            from gpukit.hardware.specs import get_spec
            from gpukit.plan.memory import validate
            from gpukit.plan.probe import local_gpu_key
            from gpukit.plan.probe import probe_host as probe

            validate(spec, settings)  # a bad setting is refused before the GPU is touched
            if settings.task != "train":
                raise PlanError(
                    "--probe-host times a training step: for generate() its per-token probe read no closer than the "
                    "calibration (held-out p50 39 % against 21 %, benchmarks/plan-probe_h100_2026-12-05.md)",
                    hint="leave --probe-host out for --task infer",
                )
            local = local_gpu_key()
            if gpu and local and get_spec(gpu).key != local:
                raise PlanError(
                    f"--probe-host times this machine's host, and --gpu {gpu} is not this machine's GPU ({local})",
                    hint="leave --gpu out to plan for this machine, or leave --probe-host out",
                )
            host = probe(spec, settings)
            gpu = gpu or local  # the probe timed this machine: its GPU is the headline's
        result = advisor.make_plan(
            spec, settings, work=work, prices=prices, measured=measured, gpu=gpu, db=db, calibration=cal, host=host
        )
        doc = result.to_dict()
        if host:
            doc["host_probe_s"] = host  # seconds per phase, timed here
        if measure:
            doc["measurement"] = _run_measure(spec, settings, doc, db, cal, host)
        if json_out:
            render.print_json(doc)
            return 0
        _print_plan(doc)
        if measure:
            _print_measure(doc["measurement"])
        return 0


def _work(spec: Any, tokens: str | None, samples: str | None) -> int | None:
    """The training run's size in the model's own unit: tokens for transformers, samples (images) for CNNs."""
    from gpukit.errors import PlanError
    from gpukit.plan.models import CnnSpec, TransformerSpec, parse_param_count

    if tokens and isinstance(spec, CnnSpec) and spec.family == "cnn":
        raise PlanError("--tokens counts tokens, and a CNN trains on images", hint=f"use --samples {tokens}")
    if samples and not tokens and isinstance(spec, TransformerSpec):
        raise PlanError("--samples counts images (CNNs), and a transformer trains on tokens", hint="use --tokens")
    if tokens:  # --tokens wins when both are given
        return parse_param_count(tokens, "--tokens")
    return parse_param_count(samples, "--samples") if samples else None


def _run_measure(spec: Any, settings: Any, doc: dict[str, Any], db: str | None, cal: Any = None,
                 host: dict[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    from gpukit.hardware.specs import match_spec
    from gpukit.plan import measure as measuring
    from gpukit.plan.compute import estimate_time
    from gpukit.plan.memory import estimate_memory

    measuring.check_db(db)  # a bad --db is found before the measurement, not after it
    meas = measuring.measure(spec, settings)
    local = match_spec(meas.device_name)
    est = None  # a GPU without a datasheet row has no predicted time: n/a, not another GPU's figure
    if local is not None:
        mem = estimate_memory(spec, settings)
        ceilings = measuring.load_ceilings(db, device_name=meas.device_name)
        measured = {k: v for k, v in (ceilings or {}).items() if k != "device"}
        est = estimate_time(spec, settings, mem, local, measured, calibration=cal, host=host)
    pred_time = None if est is None else est.step_s if settings.task == "train" else est.total_s
    cmp = _compare(doc, meas, pred_time)
    cmp["phases"] = compare_phases(est, meas)
    cmp["calibration"] = None if est is None else est.ceilings_source
    record = {
        "device": meas.device_name,
        "model": doc["model"]["name"],
        "task": settings.task,
        "predicted_allocated_bytes": doc["peak_allocated_bytes"],
        "measured_allocated_bytes": meas.peak_allocated_bytes,
        "predicted_time_s": pred_time,
        "measured_time_s": cmp["measured_time_s"],
        "settings": doc["settings"],
        "measurement": meas.to_dict(),
        "phases": cmp["phases"],
    }
    cmp["db"] = str(measuring.save_validation(record, db))
    cmp["measured"] = meas.to_dict()
    return cmp


def compare_phases(est: Any, meas: Any) -> list[dict[str, Any]]:
    """Predicted vs measured per phase: total (CUDA events) and its device / host parts (the torch profiler)."""
    predicted = {p["name"]: p for p in (est.phases if est is not None else [])}
    rows = []
    for name, wall in meas.phase_s.items():
        p = predicted.get(name, {})
        prof = meas.profile.get(name, {})
        rows.append({
            "phase": name,
            "bound": p.get("bound"),
            "predicted_s": p.get("total_s"),
            "measured_s": wall,
            "predicted_gpu_s": p.get("gpu_s"),
            "measured_device_s": prof.get("device_s"),
            "predicted_host_s": p.get("host_s"),
            "measured_host_s": prof.get("host_s"),
        })  # fmt: skip
    return rows


def _run_calibrate(path: Path | None, json_out: bool) -> int:
    from gpukit.errors import DeviceError
    from gpukit.plan.calibrate import run_calibration
    from gpukit.plan.calibration import calibration_dir, save_calibration

    try:
        import torch
    except ImportError as exc:
        from gpukit.errors import BackendUnavailable

        raise BackendUnavailable("--calibrate needs PyTorch", hint="pip install 'gpukit[torch]'") from exc
    if not torch.cuda.is_available():
        raise DeviceError("--calibrate needs a CUDA GPU (PyTorch sees none)", hint="run it on the GPU to calibrate")
    with render.console.status("calibrating") as status:
        cal = run_calibration("cuda", progress=lambda m: status.update(f"calibrating: {m}"))
    out = save_calibration(cal, path or calibration_dir() / f"{cal.gpu_key}.json")
    doc = {"path": str(out), **cal.to_dict()}
    if json_out:
        render.print_json(doc)
        return 0
    big = max(cal.gemm.get("bf16", [(0.0, 0.0)]), key=lambda r: r[0])[1]
    render.console.print(
        f"calibration for {render.escape(cal.gpu_name)} written to {render.escape(str(out))}: copy "
        f"{cal.bandwidth_gbps:,.0f} GB/s, decode read {cal.decode_gbps:,.0f} GB/s, bf16 GEMM {big:,.0f} TFLOP/s "
        f"(largest shape), {cal.launch_s * 1e6:.1f} µs per eager op on the host; `gpukit plan` uses it from now on"
    )
    return 0
