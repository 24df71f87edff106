"""The time model's measured parts for one GPU model: a calibration file, its checks, and the datasheet fallback.

A calibration holds what ``gpukit plan --calibrate`` measures on a GPU (plan/calibrate.py), each a part the time
model (plan/compute.py) multiplies by a count:

* ``gemm`` / ``attention_fwd`` / ``attention_bwd`` / ``conv``: achieved TFLOP/s against the FLOPs of one call, per
  dtype, at a fixed set of shapes; read by interpolation on log FLOPs (the nearest end outside the range);
* ``bandwidth_gbps`` (a device copy, bytes read + written) and ``decode_gbps`` (bf16 weights streamed by
  matrix-vector products, as a decode step reads them);
* ``launch_s``: host time of one small eager op (the cost each kernel launch adds to a step);
* ``host``: the host floor of one training phase as ``fixed + per_layer × layers``, per model family, precision
  mode and checkpointing variant, measured on tiny models of 1, 4 and 8 layers (there the GPU waits on the host);
  ``host_decode`` the same for prefill and one decode step of ``generate()``; ``host_cnn`` per CNN preset and
  mode, at batch 1;
* ``optimizer``: per implementation and state dtype, device seconds per parameter and the host line
  ``fixed + per_tensor × tensors``.

Files live in ``$XDG_DATA_HOME/gpukit/plan-calibration/<gpu key>.json``; the H200's ships with gpukit
(``plan/data/calibration/``). A GPU without either gets :func:`datasheet_calibration`: flat datasheet rates × a
practical fraction, and the host figures of the shipped H200 file, labelled so.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpukit.errors import PlanError
from gpukit.hardware.specs import GpuSpec

__all__ = [
    "CONVS",
    "SCHEMA",
    "Calibration",
    "HostLine",
    "calibration_dir",
    "conv_body_rate",
    "conv_forward_flops",
    "datasheet_calibration",
    "find_calibration",
    "interp_rate",
    "load_calibration",
    "save_calibration",
    "time_accuracy",
]

SCHEMA = 1
HINT = "run `gpukit plan --calibrate` on this GPU to write a new one, or delete the file to use the datasheet model"
# Large-GEMM rate achievable in practice as a fraction of the dense datasheet peak (REFERENCE.md).
PRACTICAL_GEMM_FRACTION = {"h100-sxm": 0.80, "h100-pcie": 0.80, "h200-sxm": 0.80, "a100-40gb": 0.87,
                           "a100-80gb": 0.87, "mi300x": 0.51}  # fmt: skip
DEFAULT_GEMM_FRACTION = 0.80
PRACTICAL_BW_FRACTION = 0.87  # device copy reaches 4,175 of 4,800 GB/s on an H200 (MEASURING.md)
ATTENTION_FRACTION = 0.5  # datasheet fallback: flash attention at half the GEMM rate (causal, short sequences)

HostLine = tuple[float, float]  # (fixed seconds, seconds per layer) — or per tensor for the optimizer


@dataclass(frozen=True)
class Calibration:
    gpu_name: str
    gpu_key: str
    source: str  # "calibrated <date> (<file>)" | "datasheet …": what the output names
    bandwidth_gbps: float
    decode_gbps: float
    launch_s: float
    gemm: dict[str, list[tuple[float, float]]]  # dtype → [(flops per call, TFLOP/s)], sorted by flops
    attention_fwd: dict[str, list[tuple[float, float]]]
    attention_bwd: dict[str, list[tuple[float, float]]]
    conv: dict[str, list[tuple[float, float]]]
    optimizer: dict[str, dict[str, dict[str, float]]]  # impl → dtype → {s_per_param, fixed_s, s_per_tensor}
    host: dict[str, dict[str, HostLine]]  # "family|mode|ckpt" → phase → line
    host_decode: dict[str, dict[str, HostLine]]  # family → {"prefill", "token"} → line
    host_cnn: dict[str, dict[str, float]]  # "preset|mode" → phase → seconds
    measured: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = SCHEMA
        return d


def interp_rate(points: list[tuple[float, float]], flops: float) -> float:
    """TFLOP/s at ``flops`` per call: linear in log FLOPs between measured points, the nearest end outside them."""
    if not points:
        raise PlanError("calibration has no rate for this dtype", hint=HINT)
    if len(points) == 1 or flops <= points[0][0]:
        return points[0][1]
    if flops >= points[-1][0]:
        return points[-1][1]
    for (f0, r0), (f1, r1) in itertools.pairwise(points):
        if f0 <= flops <= f1:
            w = (math.log(flops) - math.log(f0)) / (math.log(f1) - math.log(f0)) if f1 > f0 else 0.0
            return r0 + w * (r1 - r0)
    return points[-1][1]


# --- reading and checking a file ---


def _bad(path: Path | str, what: str) -> PlanError:
    return PlanError(f"calibration file {path}: {what}", hint=HINT)


def _number(v: Any, path: Path | str, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise _bad(path, f"'{where}' must be a finite number ≥ 0, got {str(v)[:40]!r}")
    return float(v)


def _table(d: Any, path: Path | str, where: str) -> dict[str, list[tuple[float, float]]]:
    if not isinstance(d, dict):
        raise _bad(path, f"'{where}' must be an object of dtype → [[flops, tflops], …]")
    out: dict[str, list[tuple[float, float]]] = {}
    for dtype, pts in d.items():
        if not isinstance(pts, list) or not pts:
            raise _bad(path, f"'{where}.{dtype}' must be a non-empty list of [flops, tflops]")
        rows = []
        for p in pts:
            if not isinstance(p, (list, tuple)) or len(p) != 2:
                raise _bad(path, f"'{where}.{dtype}' has an entry that is not [flops, tflops]")
            f, r = (_number(x, path, f"{where}.{dtype}") for x in p)
            if r <= 0:
                raise _bad(path, f"'{where}.{dtype}' has a rate of 0 TFLOP/s")
            rows.append((f, r))
        out[str(dtype)] = sorted(rows)
    return out


def _lines(d: Any, path: Path | str, where: str) -> dict[str, dict[str, HostLine]]:
    if not isinstance(d, dict):
        raise _bad(path, f"'{where}' must be an object")
    out: dict[str, dict[str, HostLine]] = {}
    for key, phases in d.items():
        if not isinstance(phases, dict):
            raise _bad(path, f"'{where}.{key}' must be an object of phase → [fixed_s, per_layer_s]")
        out[key] = {}
        for ph, line in phases.items():
            if not isinstance(line, (list, tuple)) or len(line) != 2:
                raise _bad(path, f"'{where}.{key}.{ph}' must be [fixed_s, per_layer_s]")
            out[key][ph] = (_number(line[0], path, where), _number(line[1], path, where))
    return out


def _nested_numbers(d: Any, path: Path | str, where: str, depth: int) -> Any:
    if depth == 0:
        return _number(d, path, where)
    if not isinstance(d, dict):
        raise _bad(path, f"'{where}' must be an object")
    return {str(k): _nested_numbers(v, path, f"{where}.{k}", depth - 1) for k, v in d.items()}


def from_dict(doc: Any, path: Path | str = "<dict>") -> Calibration:
    """A Calibration from its JSON document; anything malformed raises PlanError naming the field (exit 2)."""
    if not isinstance(doc, dict):
        raise _bad(path, "not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise _bad(path, f"schema {doc.get('schema')!r}, this gpukit reads schema {SCHEMA}")
    need = ("gpu_name", "gpu_key", "bandwidth_gbps", "decode_gbps", "launch_s", "gemm", "optimizer", "host")
    missing = [k for k in need if k not in doc]
    if missing:
        raise _bad(path, f"missing {', '.join(missing)}")
    bw, dec = _number(doc["bandwidth_gbps"], path, "bandwidth_gbps"), _number(doc["decode_gbps"], path, "decode_gbps")
    if bw <= 0 or dec <= 0:
        raise _bad(path, "bandwidth_gbps and decode_gbps must be above 0")
    return Calibration(
        gpu_name=str(doc["gpu_name"]),
        gpu_key=str(doc["gpu_key"]),
        source=f"calibrated {doc.get('meta', {}).get('date_utc', '?')[:10]} ({path})",
        bandwidth_gbps=bw,
        decode_gbps=dec,
        launch_s=_number(doc["launch_s"], path, "launch_s"),
        gemm=_table(doc["gemm"], path, "gemm"),
        attention_fwd=_table(doc.get("attention_fwd", {}), path, "attention_fwd"),
        attention_bwd=_table(doc.get("attention_bwd", {}), path, "attention_bwd"),
        conv=_table(doc.get("conv", {}), path, "conv"),
        optimizer=_nested_numbers(doc["optimizer"], path, "optimizer", 3),
        host=_lines(doc["host"], path, "host"),
        host_decode=_lines(doc.get("host_decode", {}), path, "host_decode"),
        host_cnn=_nested_numbers(doc.get("host_cnn", {}), path, "host_cnn", 2),
        measured=True,
        meta=dict(doc.get("meta", {})) if isinstance(doc.get("meta"), dict) else {},
    )


# (batch, in channels, size, out channels, kernel, stride) of the convolutions `plan --calibrate` times: ResNet-50's
# body, its stem and the seed CNN's
CONVS = [(64, 64, 56, 64, 3, 1), (64, 256, 56, 64, 1, 1), (64, 128, 28, 128, 3, 1), (64, 512, 7, 512, 3, 1),
         (32, 3, 224, 64, 7, 2), (256, 3, 64, 32, 3, 1)]  # fmt: skip
BODY_MIN_CHANNELS = 16  # a convolution with fewer input channels is a stem (the image's 3), not a body layer


def conv_forward_flops(n: int, c: int, size: int, oc: int, k: int, stride: int) -> float:
    """Forward FLOPs of one CONVS shape (padding k // 2, as calibrated)."""
    out = (size + 2 * (k // 2) - k) // stride + 1
    return 2.0 * n * oc * out * out * c * k * k


def conv_body_rate(table: list[tuple[float, float]]) -> float | None:
    """The FLOP-weighted mean TFLOPS (forward + backward) of the calibrated convolutions with at least
    BODY_MIN_CHANNELS input channels: what a deep CNN's layers after its stem run at. None when the table was not
    measured on this grid. Interpolating by a layer's mean FLOPs instead mixed in the 3-channel stems (8-20 TFLOPS
    in bf16 on an H200) and priced ResNet-50's convolutions at 8-260 TFLOPS by batch size, where its kernels ran at
    125-200 (bf16) and 96 (TF32) in benchmarks/plan-kernel-mix_h200_2026-12-04.md."""
    body = [conv_forward_flops(*shape) for shape in CONVS if shape[1] >= BODY_MIN_CHANNELS]
    rows = [(f, r) for f, r in table if r > 0 and any(math.isclose(f, b, rel_tol=1e-9) for b in body)]
    if not rows:
        return None
    return sum(f for f, _ in rows) / sum(f / r for f, r in rows)


def load_calibration(path: Path) -> Calibration:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PlanError(f"no such calibration file: {path}", hint=HINT) from exc
    except OSError as exc:
        raise PlanError(f"cannot read calibration file {path}: {exc.strerror}", hint=HINT) from exc
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(path, f"not valid JSON ({str(exc).splitlines()[0][:100]})") from exc
    return from_dict(doc, path)


def save_calibration(cal: Calibration, path: Path) -> Path:
    """Write ``cal`` as JSON (atomically: a half-written file never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = cal.to_dict()
    doc.pop("source", None)
    doc.pop("measured", None)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def calibration_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "gpukit" / "plan-calibration"


@functools.lru_cache(maxsize=16)
def _shipped(key: str) -> Calibration | None:
    res = resources.files("gpukit.plan").joinpath("data", "calibration", f"{key}.json")
    if not res.is_file():
        return None
    return from_dict(json.loads(res.read_text(encoding="utf-8")), f"shipped with gpukit: {key}.json")


@functools.lru_cache(maxsize=16)
def _cached(path: str, mtime_ns: int) -> Calibration:
    del mtime_ns  # part of the key: a rewritten file is read again
    return load_calibration(Path(path))


def find_calibration(spec: GpuSpec, explicit: Path | None = None) -> Calibration:
    """The calibration for ``spec``: ``explicit`` (--calibration), else the user's file for this GPU model, else the
    shipped one, else the datasheet model. An unreadable or malformed file is an error, never silently skipped."""
    if explicit is not None:
        return load_calibration(explicit)
    user = calibration_dir() / f"{spec.key}.json"
    if user.is_file():  # a plan reads it once per GPU and layout: cached on its path and modification time
        return _cached(str(user), user.stat().st_mtime_ns)
    return _shipped(spec.key) or datasheet_calibration(spec)


@functools.lru_cache(maxsize=1)
def _accuracy_doc() -> dict[str, Any]:
    res = resources.files("gpukit.plan").joinpath("data", "time_accuracy.json")
    return json.loads(res.read_text(encoding="utf-8")) if res.is_file() else {}


def time_accuracy(cal: Calibration, gpu_key: str, task: str, probed: bool = False) -> dict[str, Any]:
    """How far predictions like this one were off when measured: |predicted / measured − 1| of step time (``task``
    "train") or warm ``generate()`` time ("infer") over held-out one-GPU configurations, for this kind of
    calibration (``data/time_accuracy.json``, made by ``benchmarks/scripts/plan_time_accuracy.py`` from the published
    error table). ``calibration`` is "shipped", "calibrated" (a ``plan --calibrate`` file) or "datasheet"; ``n`` 0
    means nothing was measured for this GPU model and calibration, and then ``reference`` holds the H200's figures
    with its shipped calibration, for scale. ``probed``: the host floor came from ``plan --probe-host``, measured on
    its own (the H100 hosts of its table) for transformer training steps."""
    doc = _accuracy_doc()
    kind = "datasheet" if not cal.measured else "shipped" if "shipped with gpukit" in cal.source else "calibrated"
    if probed and (p := doc.get("probed", {})).get(task):
        return {"calibration": kind, "probed": True, "gpu": p["gpu"], "hosts": p.get("hosts"), "table": p["table"],
                **p[task]}  # fmt: skip
    table = doc.get(kind if kind != "datasheet" else "shipped", {}).get(task)
    out: dict[str, Any] = {"calibration": kind, "gpu": doc.get("gpu"), "table": doc.get("table"), "n": 0}
    if table is None:
        return out
    if kind == "datasheet" or gpu_key != doc.get("gpu_key"):
        return {**out, "reference": table}
    out.update(table)
    if kind == "shipped":  # what a calibration made on the machine did on the same kind of work
        out["with_calibration"] = doc.get("calibrated", {}).get(task)
    return out


# The host floor of the time model before `plan --calibrate` (profiles.TimingProfile of 2026-11-30), fitted on an
# H200 host — 16 Xeon cores, torch 2.11, transformers 5.17 — to the steps and generate() calls of
# benchmarks/plan_calibration_h200_2026-11-30.md: per decoder layer 1.36 ms forward + backward (+0.65 ms under
# autocast; +0.36 ms with non-reentrant checkpointing, +1.56 ms more under autocast), per CNN weight layer 0.20 ms
# (+1.0 ms per step under autocast), per decode step 0.72 ms per Llama layer / 0.42 ms per GPT-2 layer + 0.5 ms,
# 6 ms per generate() call. That fit added host and GPU time (overlap penalty 1). The forward / backward split
# (a third / two thirds) and the reentrant variant (as the non-reentrant one) are assumptions: it measured neither.
_TRAIN_MS = {"fp32": 1.36, "amp": 1.36 + 0.65, "bf16": 1.36}
_RECOMPUTE_MS = {"fp32": 0.36, "amp": 0.36 + 1.56, "bf16": 0.36}


def fitted_host_2026_11_30() -> tuple[dict[str, dict[str, HostLine]], dict[str, dict[str, HostLine]],
                                      dict[str, dict[str, float]]]:  # fmt: skip
    """(host, host_decode, host_cnn) tables of the 2026-11-30 fit, in a calibration's shapes."""
    host: dict[str, dict[str, HostLine]] = {}
    for family in ("gpt2", "llama", "qwen2"):
        for mode, ms in _TRAIN_MS.items():
            for ckpt in ("none", "non-reentrant", "reentrant"):
                extra = 0.0 if ckpt == "none" else _RECOMPUTE_MS[mode]
                host[f"{family}|{mode}|{ckpt}"] = {
                    "forward": (0.0, ms / 3e3),
                    "backward": (0.0, (2 * ms / 3 + extra) / 1e3),
                }
    decode = {family: {"prefill": (6.5e-3, per), "token": (0.5e-3, per)}
              for family, per in (("gpt2", 0.42e-3), ("llama", 0.72e-3), ("qwen2", 0.72e-3))}  # fmt: skip
    cnn: dict[str, dict[str, float]] = {}
    for name, layers in (("seed-cnn", 3), ("resnet50", 54)):
        for mode in _TRAIN_MS:
            amp = 1.0e-3 if mode == "amp" else 0.0
            cnn[f"{name}|{mode}"] = {
                "forward": (layers * 0.2e-3 + amp) / 3,
                "backward": 2 * (layers * 0.2e-3 + amp) / 3,
            }
    return host, decode, cnn


def datasheet_calibration(spec: GpuSpec) -> Calibration:
    """Flat rates from the datasheet × a practical fraction; host figures from the shipped H200 calibration (the
    host is a CPU's work, not the GPU's) or, without one, the 2026-11-30 fit's (above), said in the source."""
    frac = PRACTICAL_GEMM_FRACTION.get(spec.key, DEFAULT_GEMM_FRACTION)
    gemm = {d: [(1.0, (spec.peak_tflops(d) or 0.0) * frac)] for d in ("bf16", "fp16", "fp32", "tf32")}
    gemm = {d: v for d, v in gemm.items() if v[0][1] > 0}
    attn = {d: [(1.0, r[0][1] * ATTENTION_FRACTION)] for d, r in gemm.items()}
    conv = {d: list(v) for d, v in gemm.items()}
    base = _shipped("h200-sxm")
    assumed = "" if spec.key in PRACTICAL_GEMM_FRACTION else ", fraction assumed"
    if base:
        host_src = "host floor from the H200 calibration"
        host, decode, cnn = base.host, base.host_decode, base.host_cnn
    else:
        host_src = "host floor fitted on an H200 host (2026-11-30)"
        host, decode, cnn = fitted_host_2026_11_30()
    bw = spec.bandwidth_gbps * PRACTICAL_BW_FRACTION
    return Calibration(
        gpu_name=spec.name,
        gpu_key=spec.key,
        source=f"datasheet × practical fraction{assumed}; {host_src} — run `gpukit plan --calibrate` on it",
        bandwidth_gbps=bw,
        decode_gbps=bw,
        launch_s=base.launch_s if base else 0.0,
        gemm=gemm,
        attention_fwd=attn,
        attention_bwd=attn,
        conv=conv,
        optimizer=base.optimizer if base else {},
        host=host,
        host_decode=decode,
        host_cnn=cnn,
        measured=False,
    )
