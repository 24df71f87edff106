"""`gpukit train`, `gpukit predict`, `gpukit export`: the cats-vs-dogs classifier, for any folder of images."""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from gpukit.cli import render, skip_teardown
from gpukit.cli.engine import ENGINE_HELP, GATE_HELP, build, engine_lines
from gpukit.errors import ConfigError

MODEL_HELP = "small-cnn (default: conv stages, global pooling), seed-cnn (the article's network), resnet18/34/50."
AUGMENT_HELP = (
    "Recipe: default (random crop, shift, colour jitter; no flip), seed (the article's Keras recipe: "
    "shear, zoom, flip), classic (seed without the flip), none."
)
_SHOW_SKIPPED = 5
SHOWN_EPOCHS = 25  # at most about this many epoch lines while training and rows in the summary table


def _process_start() -> float | None:
    """When this process started (wall clock), so the run's time split counts interpreter start and imports.

    On Linux from the process's age: ``/proc/uptime`` minus its start in ``/proc/self/stat``, both counted from
    boot (10 ms ticks). Not psutil's ``create_time()``: it adds that start to the boot time in whole seconds, so it
    reads up to 1 s early (0.74 s on this project's CPU box), which start-up would have counted."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        now = time.time()
        return now - max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # no psutil either: the split starts at train() instead
        return None


def _is_main_rank() -> bool:
    return os.environ.get("RANK", "0") == "0"


class _Progress:
    """Shows a run from the library's events (rank 0 only). Under a terminal: one bar over the whole run's steps
    with the epoch, images/s, data wait, GPU use and the last validation accuracy, and the epoch lines above it;
    piped or redirected: the plain lines only (no bar, no control codes)."""

    def __init__(self, quiet: bool, console: Any = None) -> None:
        self.quiet = quiet or not _is_main_rank()
        self.console = console if console is not None else render.err_console
        self.progress: Any = None
        self.task: Any = None
        self.steps = self.epochs = 0
        self.every = 1
        self.val = ""

    def __call__(self, event: dict[str, Any]) -> None:
        if self.quiet:
            return
        kind = event["kind"]
        if kind == "data":
            self.console.print(
                f"data: {event['train']} train, {event['val']} val images; {event['skipped']} files skipped; "
                f"decoded in {render.fmt_seconds(event['decode_s'])}"
            )
        elif kind == "start":
            self._start(event)
        elif kind == "step" and self.task is not None:
            util = event["gpu_util_pct"]
            speed = (f"{event['images_per_s']:,.0f} img/s, data wait {render.fmt_seconds(event['data_wait_s'])}, "
                     f"GPU {render.NA if util is None else f'{util:.0f}%'}{self.val}")  # fmt: skip
            done = (event["epoch"] - 1) * self.steps + event["step"]
            self.progress.update(self.task, completed=done, speed=speed,
                                 description=f"epoch {event['epoch']}/{self.epochs}")  # fmt: skip
        elif kind == "epoch":
            from gpukit.train.outputs import epoch_line

            m = event["metrics"]
            if m.epoch % self.every == 0 or m.epoch == self.epochs:  # train.log keeps every epoch's line
                self.console.print(epoch_line(m))  # above the bar while it is live
            if self.task is not None:
                if m.val_accuracy is not None:  # an epoch not validated (--val-every) keeps the last one's
                    self.val = f", val acc {m.val_accuracy:.3f}"
                self.progress.update(self.task, completed=m.epoch * self.steps,
                                     speed=f"{m.images_per_s:,.0f} img/s{self.val}")  # fmt: skip

    def _start(self, event: dict[str, Any]) -> None:
        self.steps, self.epochs = event["steps"], event["epochs"]
        # a small set's 200 short epochs: every 8th line, rounded up to a multiple of the validation cadence
        val_every = event.get("val_every", 1)
        self.every = val_every * -(-max(1, -(-self.epochs // SHOWN_EPOCHS)) // val_every)
        if not self.console.is_terminal or self.task is not None:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("steps"), TextColumn("{task.fields[speed]}"), TimeElapsedColumn(),
                                 console=self.console, transient=True, refresh_per_second=8)  # fmt: skip
        self.progress.start()
        done = event["epoch"] * self.steps + event["step"]
        first = f"epoch {event['epoch'] + 1}/{self.epochs}"
        self.task = self.progress.add_task(first, total=self.epochs * self.steps, completed=done, speed="starting")

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()
            self.task = None


def _train_command(
    data: Path = typer.Argument(..., help="Folder with one sub-folder per class (or train/ and val/ inside it)."),
    model: str = typer.Option("small-cnn", "--model", help=MODEL_HELP),
    epochs: int = typer.Option(25, "--epochs", help="Epochs (the seed's 25)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Images per step per process (global = × processes)."),
    image_size: int = typer.Option(64, "--image-size", help="Images are resized to S×S (the seed's 64)."),
    lr: float = typer.Option(2e-3, "--lr", help="Adam learning rate (the seed's Keras default: 1e-3)."),
    weight_decay: float = typer.Option(0.05, "--weight-decay", help="Decoupled weight decay (AdamW); 0: plain Adam."),
    label_smoothing: float = typer.Option(0.1, "--label-smoothing", help="Label smoothing of the training loss."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto."),
    seed: int = typer.Option(0, "--seed", help="Seed for the split, initialisation, order and augmentation."),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default runs/MODEL-TIME)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its last good checkpoint."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Held-out share when there is no val/ folder."),
    workers: int | None = typer.Option(None, "--workers", help="Decode processes (default: CPU cores)."),
    cache: str = typer.Option("auto", "--cache", help="Decoded images on the gpu, or pinned on the cpu; auto."),
    amp: str = typer.Option("auto", "--amp", help="bf16, fp16, off; auto = bf16 on a GPU with it or a CPU with AMX."),
    compile_: bool = typer.Option(False, "--compile", help="torch.compile the model."),
    cuda_graphs: bool = typer.Option(True, "--cuda-graphs/--no-cuda-graphs", help="Replay the step as a CUDA graph."),
    cudnn_benchmark: bool = typer.Option(
        False, "--cudnn-benchmark/--no-cudnn-benchmark", help="Time cuDNN's kernels for the fixed shapes first."
    ),
    channels_last: bool = typer.Option(True, "--channels-last/--no-channels-last", help="NHWC memory layout."),
    weights: Path | None = typer.Option(None, "--weights", help="Local pretrained weights (safetensors / .pt)."),
    augment: str = typer.Option("default", "--augment", help=AUGMENT_HELP),
    no_augment: bool = typer.Option(False, "--no-augment", help="Only rescale (the same as --augment none)."),
    hflip: bool | None = typer.Option(None, "--hflip/--no-hflip", help="Mirror half the images (off unless asked)."),
    shear_deg: float | None = typer.Option(None, "--shear-deg", help="Shear range in degrees (the seed's 0.2)."),
    zoom: float | None = typer.Option(None, "--zoom", help="Zoom range: factors in [1-z, 1+z] (the seed's 0.2)."),
    rotation_deg: float | None = typer.Option(None, "--rotation-deg", help="Rotation range in degrees (30; 0: off)."),
    colour: float | None = typer.Option(None, "--colour", help="Brightness factor range [1-c, 1+c] (0.3)."),
    contrast: float | None = typer.Option(None, "--contrast", help="Contrast factor range [1-c, 1+c] (0.3)."),
    saturation: float | None = typer.Option(None, "--saturation", help="Saturation factor range [1-c, 1+c] (0.3)."),
    crop: float | None = typer.Option(None, "--crop", help="Random crop: window area share in [c, 1/c] (0.8; 1: off)."),
    shift: float | None = typer.Option(None, "--shift", help="Random shift: up to this share of the side (0.1)."),
    geometry_p: float | None = typer.Option(
        None, "--geometry-p", help="Share of images cropped/shifted (0.5); the rest pass unresampled."
    ),
    min_steps: int = typer.Option(3600, "--min-steps", help="At least this many optimizer steps (adds epochs)."),
    schedule: str = typer.Option("cosine", "--schedule", help="Learning rate: cosine, one-cycle or constant."),
    warmup: float = typer.Option(0.05, "--warmup", help="Share of the steps spent warming up (cosine)."),
    min_delta: float = typer.Option(1e-3, "--min-delta", help="Val-loss gain that makes a new best epoch."),
    patience: int = typer.Option(0, "--patience", help="Stop after N epochs without a new best (0: never)."),
    val_every: int = typer.Option(
        0, "--val-every", help="Validate every N epochs, the first and the last (0: about every 30 steps)."
    ),
    checkpoint_every_s: float = typer.Option(
        30.0, "--checkpoint-every-s", help="Least seconds between checkpoints after epochs (0: every epoch)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar or epoch lines."),
    as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
) -> int:
    """Train an image classifier on a folder of images (the seed's cats-vs-dogs CNN, or a ResNet)."""
    from gpukit.train.augment import recipe
    from gpukit.train.config import TrainConfig
    from gpukit.train.loop import train

    started = _process_start()
    aug = recipe("none" if no_augment else augment, hflip=hflip, shear_deg=shear_deg, zoom=zoom,
                 rotation_deg=rotation_deg, colour=colour, contrast=contrast, saturation=saturation, crop=crop,
                 shift=shift, geometry_p=geometry_p)  # fmt: skip
    cfg = TrainConfig(data=data, model=model, epochs=epochs, batch_size=batch_size, image_size=image_size, lr=lr,
                      weight_decay=weight_decay, label_smoothing=label_smoothing,
                      device=device, seed=seed, out=out, resume=resume, val_fraction=val_fraction, workers=workers,
                      cache=cache, amp=amp, compile=compile_, cuda_graphs=cuda_graphs,
                      cudnn_benchmark=cudnn_benchmark, channels_last=channels_last, weights=weights, augment=aug,
                      min_steps=min_steps, schedule=schedule, warmup=warmup, min_delta=min_delta,
                      patience=patience, val_every=val_every, checkpoint_every_s=checkpoint_every_s)  # fmt: skip
    progress = _Progress(quiet or as_json)
    try:
        result = train(cfg, on_event=progress, started_at=started)
    finally:
        progress.stop()
    skip_teardown()  # every file is written and synced: the process may end without finalizing torch
    if not _is_main_rank():
        return 0
    if as_json:
        render.print_json(result)
    else:
        _print_summary(result)
    return 130 if result.interrupted else 0


def _shown_epochs(result: Any) -> list[Any]:
    """The epochs the summary table shows: all of up to SHOWN_EPOCHS, else every n-th, the best and the last; of
    the validated epochs when some were not (--val-every)."""
    pool = [m for m in result.epochs if m.val_loss is not None] or result.epochs
    every = max(1, -(-len(pool) // SHOWN_EPOCHS))
    last = len(result.epochs)
    return [m for i, m in enumerate(pool, 1) if i % every == 0 or m.epoch in (1, last, result.best_epoch)]


def _print_summary(result: Any) -> None:
    rows = [(m.epoch, f"{m.train_loss:.4f}", f"{m.train_accuracy:.3f}", render.fmt(m.val_loss, ".4f"),
             render.fmt(m.val_accuracy, ".3f"), f"{m.images_per_s:,.0f}", render.fmt_seconds(m.data_wait_s),
             render.fmt(m.gpu_util_pct, ".0f", "%")) for m in _shown_epochs(result)]  # fmt: skip
    title = (f"{result.model} on {result.device} × {result.world_size}, amp {result.amp}, cache {result.cache}, "
             f"CUDA graphs {'on' if result.cuda_graphs else 'off'}")  # fmt: skip
    if len(rows) < len(result.epochs):
        title += f"; {len(rows)} of {len(result.epochs)} epochs shown (all in metrics.csv)"
    cols = ["epoch", "loss", "acc", "val loss", "val acc", "img/s", "data wait", "GPU"]
    render.console.print(render.table(cols, rows, title=title, justify=["right"] * len(cols)))
    best = f"best: epoch {result.best_epoch} (lowest validation loss)" if result.best_epoch else "best: none"
    render.console.print(f"run folder: {result.run_dir}  ({result.skipped_files} files skipped); {best}")
    render.console.print(_verdict_line(result))
    for path, reason in result.skipped[:_SHOW_SKIPPED]:
        render.console.print(escape(f"skipped {path}: {reason}"))
    if len(result.skipped) > _SHOW_SKIPPED:
        render.console.print(
            escape(f"… and {len(result.skipped) - _SHOW_SKIPPED} more, listed in {result.run_dir}/skipped.txt")
        )
    if result.val_accuracy_mirrored is not None:
        render.console.print(f"validation mirrored left-right: accuracy {result.val_accuracy_mirrored:.3f}")
    render.console.print(_times_line(result.times))
    for note in result.notes:
        render.console.print(escape(f"note: {note}"))
    for warning in result.warnings:
        render.err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    if result.interrupted:
        render.console.print("interrupted: a checkpoint was saved; continue with --resume")


def _verdict_line(result: Any) -> str:
    """`verdict: generalised (validation accuracy 0.975; chance 0.500)`, or `did not generalise`, in words."""
    accs = [m.val_accuracy for m in result.epochs if m.val_accuracy is not None]
    if not accs or result.chance_accuracy is None:
        return f"verdict: {result.verdict or 'not checked'}"
    colour = "red" if result.verdict == "did not generalise" else "green"
    return (f"verdict: [{colour}]{result.verdict}[/{colour}] (best validation accuracy {max(accs):.3f}; chance "
            f"{result.chance_accuracy:.3f})")  # fmt: skip


def _times_line(t: Any) -> str:
    """The wall-time split of the run, one line."""
    parts = [("start-up", t.startup_s), ("decode", t.decode_s), ("imports", t.imports_s), ("setup", t.setup_s),
             ("compile/capture", t.capture_s), ("train", t.train_s), ("validate", t.validate_s), ("save", t.save_s),
             ("other", t.other_s)]  # fmt: skip
    shown = ", ".join(f"{name} {render.fmt_seconds(v)}" for name, v in parts if v is not None)
    return f"wall time {render.fmt_seconds(t.total_s)}: {shown}"


def _predict_command(
    model: Path = typer.Argument(..., help="A run folder, or a checkpoint's .json / .safetensors."),
    inputs: list[Path] = typer.Argument(..., help="Images or folders of images."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto."),
    batch_size: int = typer.Option(256, "--batch-size", help="Images per forward pass."),
    as_json: bool = typer.Option(False, "--json", help="A JSON list of rows: path, label, probability, scores."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV rows: path, label, probability."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="Default: fp32 eager, the numbers validation gave. " + ENGINE_HELP.split("; default")[0] + ".",
    ),
    amp: str = typer.Option("off", "--amp", help="With --engine: off (fp32) or bf16 (autocast on CUDA)."),
    gate_images: Path | None = typer.Option(None, "--gate-images", help=GATE_HELP),
) -> int:
    """Label every image with the trained model (two classes: ≥ 0.5 → the second class, as in the seed)."""
    from gpukit.train.predict import predict

    if as_json and as_csv:
        raise ConfigError("choose one of --json and --csv")
    forward = None
    if engine is not None:  # built, gated and chosen as `gpukit serve` does it; what it chose goes to stderr
        runner, choice = build(model, device, engine, amp, batch_size, gate_images)
        forward = runner
        for line in engine_lines(choice.to_dict()):
            render.err_console.print(line, soft_wrap=True, markup=False)
    rows, skipped = predict(model, inputs, device=device, batch_size=batch_size, forward=forward)
    if as_json:
        render.print_json(rows)  # a list of rows: path, label, probability, scores; skipped files go to stderr
    elif as_csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(["path", "label", "probability"])
        writer.writerows([r.path, r.label, f"{r.probability:.6f}"] for r in rows)
    else:
        table = render.table(
            ["path", "label", "probability"], [(r.path, r.label, f"{r.probability:.4f}") for r in rows]
        )
        render.console.print(table)
    for path, reason in skipped:
        render.err_console.print(f"skipped {path}: {reason}")
    return 0 if rows or not skipped else 1


def _export_command(
    model: Path = typer.Argument(..., help="A run folder, or a checkpoint's .json / .safetensors."),
    onnx: Path | None = typer.Option(None, "--onnx", help="Write ONNX here; checked against torch with onnxruntime."),
    opset: int = typer.Option(17, "--opset", help="ONNX opset."),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="Build, gate and cache this engine beside the "
        "checkpoint for `gpukit serve` (" + ENGINE_HELP.split("; default")[0] + ").",
    ),
    device: str = typer.Option("auto", "--device", help="With --engine: cpu, cuda or auto (the serving device)."),
    amp: str = typer.Option("off", "--amp", help="With --engine: off (fp32) or bf16 (autocast on CUDA)."),
    max_batch: int = typer.Option(64, "--max-batch", help="With --engine: the --max-batch `gpukit serve` will use."),
    gate_images: Path | None = typer.Option(None, "--gate-images", help=GATE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> int:
    """Export the trained model to ONNX (checked against torch with onnxruntime), or build its serving engine."""
    from gpukit.train.export import export_onnx

    if onnx is None and engine is None:
        raise ConfigError("nothing to export", hint="give --onnx FILE, or --engine auto|compile|tensorrt|eager")
    if engine is not None:
        _, choice = build(model, device, engine, amp, max_batch, gate_images)
        if as_json and onnx is None:
            render.print_json(choice.to_dict())
        for line in engine_lines(choice.to_dict()):
            render.err_console.print(line, soft_wrap=True, markup=False)
        if onnx is None:
            return 0
    assert onnx is not None
    result = export_onnx(model, onnx, opset=opset)
    if as_json:
        render.print_json(result)
    else:
        render.console.print(
            f"wrote {result.path}: {result.model}, {result.image_size}×{result.image_size}, classes "
            f"{', '.join(result.classes)}; onnxruntime {result.onnxruntime_version} matches torch on "
            f"{result.checked_images} images (max |diff| {result.max_abs_diff:.2g} ≤ {result.tolerance:g})"
        )
    return 0


def register(app: typer.Typer) -> None:
    """Add `train`, `predict` and `export`."""
    app.command("train")(_train_command)
    app.command("predict")(_predict_command)
    app.command("export")(_export_command)
