"""A simulated fleet of acceptance documents: each figure drawn around its H200 median with the measured run-to-run
spread (tests/fixtures/fleet/h200_spread.json), some GPUs slowed by a known fraction on one figure.

Used by the detection test, the status/outliers/compare/report/exporter tests and the timing test (``import
fleet_synthetic``: tests/ is on the path, as for ``pg_server``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpukit.fleet import stats

SPREAD_FILE = Path(__file__).resolve().parent / "fixtures" / "fleet" / "h200_spread.json"
DRIVER = "580.159.04"


def load_spread(path: Path = SPREAD_FILE) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def sigmas(doc: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Figure → relative noise σ: its run-to-run spread (max/min − 1) over the runs the file says, / d2(runs)."""
    doc = doc or load_spread()
    return {name: _sigma(doc, f) for name, f in doc["figures"].items()}


def _sigma(doc: Mapping[str, Any], spec: Mapping[str, Any]) -> float:
    return stats.sigma_from_spread(float(spec["spread"]), int(spec.get("runs") or doc.get("runs") or 10))


def _identity(name: str, gpus: int, driver: str = DRIVER) -> dict[str, Any]:
    stack = {"gpukit": "0.1.0", "torch": "2.11.0", "python": "3.12.3"}
    return {
        "name": name,
        "hostname": name,
        "driver": driver,
        "cuda": "13.0",
        "gpus": [
            {
                "index": i,
                "uuid": f"GPU-{name}-{i}",
                "serial": f"S{name}{i}",
                "name": "NVIDIA H200",
                "pci_bus_id": f"0000:{i:02x}:00.0",
            }
            for i in range(gpus)
        ],
        "stack": stack,
        "stack_key": f"drv{driver} cuda13.0 torch2.11.0 gpukit0.1",
    }


def _telemetry(rng: random.Random, slow: bool, power_limit_w: float) -> dict[str, Any]:
    clock = 1755 if slow else 1980
    return {
        "sm_clock_mhz": clock - rng.randint(0, 15),
        "power_w": round(power_limit_w - rng.uniform(5, 40), 1),
        "temp_c": rng.randint(55, 66) + (12 if slow else 0),
        "throttle_reasons": ["hw_thermal_slowdown"] if slow else [],
    }


def _soak(rng: random.Random, median: float, factor: float, seconds: int = 30) -> dict[str, Any]:
    trace = []
    for t in range(1, seconds + 1):
        sag = factor if t > seconds // 3 else 1.0  # a slowed GPU sags after its first third
        trace.append({"t_s": float(t), "tflops": round(median * sag * (1 + rng.gauss(0, 0.002)), 2),
                      "sm_clock_mhz": 1980 if sag == 1.0 else 1755, "power_w": 690.0, "temp_c": 60,
                      "throttle_reasons": [] if sag == 1.0 else ["hw_thermal_slowdown"]})  # fmt: skip
    return {"duration_s": float(seconds), "trace": trace, "sag": round(1 - factor, 4), "flags": [], "status": "ok",
            "reason": None}  # fmt: skip


def _health(index: int, power_limit_w: float) -> dict[str, Any]:
    """An NVML snapshot as `accept` records it before and after the run (settings and readings)."""
    return {"index": index, "reachable": True, "ecc_enabled": True, "ecc_corrected_volatile": 0,
            "ecc_uncorrected_volatile": 0, "retired_pages_sbe": 0, "retired_pages_dbe": 0,
            "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0, "power_limit_w": power_limit_w,
            "sm_clock_mhz": 345, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 3201, "mem_clock_max_mhz": 3201,
            "app_sm_clock_mhz": 1785, "temperature_c": 38, "pcie_gen": 5, "pcie_width": 16,
            "throttle_reasons": []}  # fmt: skip


def _samples(rng: random.Random, slow: bool, power_limit_w: float, seconds: int = 70) -> list[dict[str, Any]]:
    """NVML sampled at 2 Hz over the run, as `accept` keeps it: what makes a real document large."""
    return [{"t_s": i / 2, **_telemetry(rng, slow, power_limit_w), "mem_clock_mhz": 3201} for i in range(2 * seconds)]


def _median(spec: Mapping[str, Any]) -> float:
    return float(spec["median"] if "median" in spec else spec["value"])  # a spread file or a shipped reference


def _gpu(rng: random.Random, name: str, index: int, doc: Mapping[str, Any], slow: tuple[str, float] | None,
         power_limit_w: float, samples: bool) -> dict[str, Any]:  # fmt: skip
    figures = {}
    for fig, spec in doc["figures"].items():
        sigma = _sigma(doc, spec)
        factor = 1 - slow[1] if slow and slow[0] == fig else 1.0
        value = _median(spec) * factor * (1 + rng.gauss(0, sigma))
        figures[fig] = {
            "value": value, "unit": spec["unit"], "higher_is_better": spec.get("higher_is_better", True),
            "status": "ok", "reason": None, "rel_error": 0.002, "spread": 0.004, "reference": _median(spec),
            "flags": [], "telemetry": _telemetry(rng, factor < 1.0, power_limit_w),
        }  # fmt: skip
    factor = 1 - slow[1] if slow else 1.0
    return {
        "index": index, "uuid": f"GPU-{name}-{index}", "serial": f"S{name}{index}", "model": doc["model"],
        "figures": figures, "soak": _soak(rng, _median(doc["figures"]["soak_gemm_tflops"]), factor),
        "telemetry": {"before": _health(index, power_limit_w), "after": _health(index, power_limit_w),
                      "samples": _samples(rng, factor < 1.0, power_limit_w) if samples else []},
        "verdict": "ok", "reasons": [],
    }  # fmt: skip


def acceptance(name: str, gpus: int = 8, *, seed: int = 0, slowed: Mapping[int, tuple[str, float]] | None = None,
               doc: Mapping[str, Any] | None = None, driver: str = DRIVER, power_limit_w: float = 700.0,
               started_at: str = "2026-12-01T20:00:00Z", samples: bool = True) -> dict[str, Any]:  # fmt: skip
    """One node's acceptance document; ``slowed`` maps a GPU index to (figure, fraction slower). ``samples``: NVML
    sampled over the run, as a real document has (the detection test, which never reads them, leaves them out)."""
    doc = doc or load_spread()
    rng = random.Random(f"{seed}-{name}")
    slowed = slowed or {}
    return {
        "kind": "gpukit-accept", "version": 1, "started_at": started_at, "duration_s": 71.0,
        "node": _identity(name, gpus, driver), "device": "cuda",
        "settings": {"soak_s": 30.0, "slow_vs_peers": 0.05, "slow_vs_reference": 0.10},
        "reference": {"model": doc["model"], "source": "tests/fixtures/fleet/h200_spread.json", "date": "2026-12-01"},
        "gpus": [_gpu(rng, name, i, doc, slowed.get(i), power_limit_w, samples) for i in range(gpus)],
        "node_checks": {"p2p": None, "allreduce": None}, "verdict": "ok", "reasons": [],
    }  # fmt: skip


def fleet(nodes: int = 64, gpus: int = 8, *, seed: int = 0,
          slowed: Mapping[tuple[int, int], tuple[str, float]] | None = None,
          doc: Mapping[str, Any] | None = None, samples: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """``nodes`` acceptance documents (node-000 …); ``slowed`` maps (node, gpu) to (figure, fraction slower)."""
    doc = doc or load_spread()
    slowed = slowed or {}
    out = []
    for n in range(nodes):
        mine = {g: s for (nn, g), s in slowed.items() if nn == n}
        out.append(acceptance(f"node-{n:03d}", gpus, seed=seed, slowed=mine, doc=doc, samples=samples))
    return out
