"""The one comparison of gpukit: two sets of timed samples of the same row → SAME, FASTER, SLOWER or UNSURE.

`gpukit history compare`, `gpukit bench --baseline` and the ``gpukit_bench`` pytest fixture all call
:func:`classify`; none of them compares against a fixed percent.

Each side is summarised by :class:`Spread`: its median, its interquartile range (the middle half of its samples)
and a distribution-free 90 % confidence interval of its median (order statistics; no normal law assumed). Then,
with ``d`` = median B / median A − 1 (time per call: positive means B is slower):

* **SAME** — ``|d|`` is within the *noise band*: the larger of the two sides' interquartile ranges relative to their
  median and, when the history holds at least :data:`RUN_TO_RUN_MIN` other runs of the row in the same hardware
  state, its *run-to-run band* (:class:`RunToRun`). A difference smaller than the middle half of either run's own
  samples, or than what unchanged runs of the row have already shown between them, is not a difference. (Between
  bench rows, a row that never settled at its noise target turns SAME into UNSURE unless a run-to-run band is known:
  ``baselines.settled_same``.)

Samples taken back to back inside one process understate how much two processes differ: on an H200, 14 reruns of
``bench --quick --device cuda`` had 0.1–1 % interquartile ranges per row but 1–2 % between runs (a run's boost
clock, where its buffers landed), and two such runs compared by their samples alone came out SAME in only half of
the row pairs. The run-to-run band is :data:`RUN_TO_RUN_FACTOR` × the range of the other runs' medians over their
median: distribution-free, so heavy tails (a pageable copy, a torch Mandelbrot whose runs spread 50 %) widen it
instead of being assumed away.
* **SLOWER / FASTER** — ``|d|`` is beyond the band *and* the two medians' intervals do not overlap: the samples
  themselves say the medians differ.
* **UNSURE** — beyond the band but the intervals overlap (too few or too noisy samples to tell), or a side has
  fewer than :data:`MIN_SAMPLES` samples (fewer than :data:`MIN_APART`: too few for a 90 % interval, so never
  SLOWER or FASTER).

Two runs are only compared when they were taken in the same hardware state (:func:`state_differences`): a
throttled or reconfigured GPU, another driver or another torch makes a "regression" that the code never had.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "CONFIDENCE",
    "MIN_SAMPLES",
    "MODEL_STATE_KEYS",
    "RUN_TO_RUN_MIN",
    "VERDICTS",
    "RunToRun",
    "Spread",
    "Verdict",
    "classify",
    "median_interval",
    "model_state_differences",
    "state_differences",
]

CONFIDENCE = 0.90  # of each median's interval (two 90 % intervals apart: a difference at about the 99 % level)
MIN_SAMPLES = 3  # fewer samples on a side: UNSURE
# The fewest samples whose widest interval (their range) covers the median with CONFIDENCE: 1 − 2·2⁻ⁿ ≥ 0.9 → n ≥ 5.
# With fewer, the samples cannot say SLOWER or FASTER (only SAME, or UNSURE).
MIN_APART = next(n for n in range(1, 64) if 1 - 2.0 ** (1 - n) >= CONFIDENCE)
VERDICTS = ("SAME", "FASTER", "SLOWER", "UNSURE")
RUN_TO_RUN_MIN = 3  # other runs of a row needed to know its run-to-run noise
RUN_TO_RUN_RUNS = 20  # the newest this many are used
RUN_TO_RUN_FACTOR = 1.5  # × the range of their medians (chosen on the H200 reruns: benchmarks/engine_rerun_h200_*)


def _binom_cdf(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n


def median_interval(sorted_s: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval holding the true median with probability ≥ ``confidence``: the order statistics
    X(j) and X(n+1−j) with the largest j whose binomial coverage 1 − 2·P(Bin(n, ½) < j) reaches it; with too few
    samples for that, the whole range (the widest interval the samples give)."""
    n = len(sorted_s)
    if n == 0:
        raise ValueError("no samples")
    if n > 200:  # the normal approximation of the binomial is exact enough here, and comb() would be slow
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        j = max(1, math.floor(n / 2 - z * math.sqrt(n) / 2))
    else:
        j = 0
        while j + 1 <= n // 2 and 1 - 2 * _binom_cdf(j, n) >= confidence:  # coverage of [X(j+1), X(n-j)]
            j += 1
        j = max(j, 1)
    return sorted_s[j - 1], sorted_s[n - j]


@dataclass(frozen=True)
class Spread:
    """One row's samples, summarised for comparison (seconds per call)."""

    n: int
    median_s: float
    q1_s: float
    q3_s: float
    ci_low_s: float
    ci_high_s: float

    @classmethod
    def from_samples(cls, samples_s: Sequence[float]) -> Spread:
        t = sorted(float(s) for s in samples_s)
        if not t:
            raise ValueError("no samples")
        if len(t) >= 2:
            q1, _, q3 = statistics.quantiles(t, n=4, method="inclusive")
        else:
            q1 = q3 = t[0]
        lo, hi = median_interval(t)
        return cls(len(t), statistics.median(t), q1, q3, lo, hi)

    @property
    def rel_iqr(self) -> float:
        """Interquartile range / median: the width of the middle half of the samples."""
        return (self.q3_s - self.q1_s) / self.median_s if self.median_s > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spread:
        f = {k: float(data[k]) for k in ("median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s")}
        return cls(n=int(data["n"]), **f)


@dataclass(frozen=True)
class RunToRun:
    """How much one row's median moved between unchanged runs: ``band`` = :data:`RUN_TO_RUN_FACTOR` × (largest −
    smallest median) / their median, over ``runs`` runs."""

    band: float
    runs: int

    @classmethod
    def from_medians(cls, medians_s: Sequence[float]) -> RunToRun | None:
        """From other runs' medians of the row (the newest :data:`RUN_TO_RUN_RUNS`); None with fewer than
        :data:`RUN_TO_RUN_MIN` or a median that is not positive."""
        m = [float(x) for x in medians_s][-RUN_TO_RUN_RUNS:]
        if len(m) < RUN_TO_RUN_MIN or min(m) <= 0:
            return None
        return cls(RUN_TO_RUN_FACTOR * (max(m) - min(m)) / statistics.median(m), len(m))


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`classify`. ``change`` = median B / median A − 1 (time: > 0 is slower);
    ``band`` the noise band it was held against; ``why`` one line a person can read."""

    verdict: str  # SAME | FASTER | SLOWER | UNSURE
    change: float
    band: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify(a: Spread, b: Spread, run_to_run: RunToRun | None = None) -> Verdict:
    """B against A (see the module docstring); ``run_to_run``: the row's run-to-run band, when known."""
    if a.median_s <= 0 or b.median_s <= 0:
        return Verdict("UNSURE", math.nan, math.nan, "a median time is not positive")
    change = b.median_s / a.median_s - 1.0
    within = max(a.rel_iqr, b.rel_iqr)
    band = max(within, run_to_run.band if run_to_run else 0.0)
    if run_to_run is None:
        noise = f"the noise band ±{band:.2%} (run-to-run noise unknown: fewer than {RUN_TO_RUN_MIN} other runs)"
    elif band > within:
        noise = f"the run-to-run band ±{band:.2%} ({run_to_run.runs} other runs)"
    else:
        noise = f"the noise band ±{band:.2%}"
    if min(a.n, b.n) < MIN_SAMPLES:
        return Verdict("UNSURE", change, band, f"fewer than {MIN_SAMPLES} samples on a side ({a.n} and {b.n})")
    if abs(change) <= band:
        return Verdict("SAME", change, band, f"{change:+.2%} is within {noise}")
    if min(a.n, b.n) < MIN_APART:
        return Verdict("UNSURE", change, band, f"{change:+.2%} is beyond {noise}, but {min(a.n, b.n)} samples "
                       f"cannot give a {CONFIDENCE:.0%} interval (need {MIN_APART})")  # fmt: skip
    apart = b.ci_low_s > a.ci_high_s or a.ci_low_s > b.ci_high_s
    if not apart:
        return Verdict("UNSURE", change, band, f"{change:+.2%} is beyond {noise} but the medians' intervals overlap")
    name = "SLOWER" if change > 0 else "FASTER"
    return Verdict(name, change, band, f"{change:+.2%} beyond {noise}, the medians' 90 % intervals apart")


# What makes two runs' hardware state differ: every key both sides know must be equal (an unknown value is not a
# difference: runs saved before a field was recorded still compare).
STATE_KEYS = (
    "cpu_model",
    "cpu_threads",
    "gpu_count",
    "gpu_names",
    "driver_version",
)
GPU_STATE_KEYS = (
    "name",
    "serial",
    "uuid",
    "app_sm_clock_mhz",
    "app_mem_clock_mhz",
    "max_sm_clock_mhz",
    "power_limit_w",
    "persistence_mode",
    "ecc_enabled",
    "mig_enabled",
)


# What a reference for a GPU model (a shipped or another node's baseline file) must share with this machine: the
# GPU model and the settings that change its figures. Serials, the host, the GPU count, the driver and the software
# versions necessarily or usually differ between two machines of one model: they are marked, never refused.
MODEL_STATE_KEYS = ("name", "app_sm_clock_mhz", "app_mem_clock_mhz", "max_sm_clock_mhz", "power_limit_w",
                    "ecc_enabled", "mig_enabled")  # fmt: skip


def _gpu_differences(ma: Mapping[str, Any], mb: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    """GPU by GPU, the ``keys`` both machines' ``gpu_state`` know and disagree on (unknown is not a difference)."""
    out = []
    for i, (da, db) in enumerate(zip(ma.get("gpu_state") or [], mb.get("gpu_state") or [], strict=False)):
        for key in keys:
            va, vb = da.get(key), db.get(key)
            if va is not None and vb is not None and va != vb:
                out.append(f"GPU {i} {key}: {va} vs {vb}")
    return out


def model_state_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The differences of :func:`state_differences` that matter between a machine and a reference for its GPU
    model: the GPU models (as a set: a reference from an 8-GPU node judges a 1-GPU one) and, GPU by GPU, the keys
    of :data:`MODEL_STATE_KEYS`."""
    ma, mb = a.get("machine") or {}, b.get("machine") or {}
    out: list[str] = []
    na, nb = ma.get("gpu_names"), mb.get("gpu_names")
    if na is not None and nb is not None and set(na) != set(nb):
        out.append(f"gpu_names: {sorted(set(na))} vs {sorted(set(nb))}")
    return out + _gpu_differences(ma, mb, MODEL_STATE_KEYS)


def state_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """How two hardware states differ, one line each (empty: the same as far as both know). A state is
    ``{"machine": run.machine, "versions": run.versions}``; ``machine["gpu_state"]`` is a list of per-GPU dicts
    (:func:`gpukit.hardware.state.gpu_states`)."""
    out: list[str] = []
    ma, mb = a.get("machine") or {}, b.get("machine") or {}
    for key in STATE_KEYS:
        va, vb = ma.get(key), mb.get(key)
        if va is not None and vb is not None and va != vb:
            out.append(f"{key}: {va} vs {vb}")
    out += _gpu_differences(ma, mb, GPU_STATE_KEYS)
    va_, vb_ = a.get("versions") or {}, b.get("versions") or {}
    for key in sorted(set(va_) & set(vb_)):
        if va_[key] != vb_[key]:
            out.append(f"{key} {va_[key]} vs {vb_[key]}")
    return out
