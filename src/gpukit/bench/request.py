"""What a `gpukit bench` run is asked to do: one frozen, typed :class:`BenchRequest`.

The CLI flags map onto its fields one to one; :meth:`BenchRequest.resolved` fills every default in this one place
(repeats, warm-up, per-result budget, slow-call samples, seed), so the runner, the sweep and the stored run all
see the same values. The run keeps the request (``Run.request``) and its JSON form (``Run.settings``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpukit.bench.conditions import CACHE_MODES
from gpukit.bench.harness import CALL_TIMEOUT_S, NOISE_TARGET, Settings
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.bench.workloads.base import Workload

__all__ = ["DEVICES", "BenchRequest"]

DEVICES = ("cpu", "cuda", "all")
BUDGET_S = 30.0  # per result: a plain bench
QUICK_BUDGET_S = 10.0
SWEEP_BUDGET_S = 5.0  # per result in a sweep
SWEEP_TOTAL_S = 240.0  # the whole sweep; sizes not started by then are skipped with the reason
# Noise-based stopping: seconds of sampling a row may take to settle (then it stops, unsettled), and seconds of timed
# calls before it may stop (nvbench: 0.5 s; a --quick row is a first look and takes none).
MAX_TIME_S = 3.0
QUICK_MAX_TIME_S = 0.3
SWEEP_MAX_TIME_S = 0.5
MIN_TIME_S = 0.1


@dataclass(frozen=True)
class BenchRequest:
    """One run. ``workloads``: registry names or :class:`~gpukit.bench.Workload` objects (empty: the defaults, or
    the sweep's list); ``backends``: backend or implementation names (empty: every available one on ``device``);
    ``sizes``: size labels each workload parses (empty: its defaults, or its sweep ladder).

    ``repeat``/``budget_s``/``seed`` None mean "the default for this kind of run" (:meth:`resolved`).
    ``sweep_total_s`` bounds a whole sweep (None: unbounded). ``call_timeout_s`` bounds one call (None: none).
    """

    workloads: tuple[str | Workload, ...] = ()
    backends: tuple[str, ...] = ()
    device: str = "all"
    sizes: tuple[str, ...] = ()
    quick: bool = False
    repeat: int | None = None
    energy: bool = False
    ceilings: bool = True
    seed: int | None = None
    budget_s: float | None = None
    call_timeout_s: float | None = CALL_TIMEOUT_S
    sweep: bool = False
    sweep_total_s: float | None = SWEEP_TOTAL_S
    noise_target: float = NOISE_TARGET
    max_time_s: float | None = None
    cache: str = "auto"
    throttle_check: bool = True
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False)  # recorded as-is (e.g. the command)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device '{self.device}'", hint="use --device cpu, cuda or all")
        if self.seed is not None and not 0 <= self.seed < 2**32:
            raise ConfigError(f"bad --seed {self.seed}", hint="use a seed between 0 and 4294967295 (or leave it out)")
        if self.repeat is not None and self.repeat < 1:
            raise ConfigError(f"bad --repeat {self.repeat}", hint="take at least one timed sample")
        if self.budget_s is not None and not self.budget_s > 0:
            raise ConfigError(f"bad --budget {self.budget_s}", hint="give seconds per result, e.g. --budget 10")
        if self.call_timeout_s is not None and not self.call_timeout_s > 0:
            raise ConfigError(f"bad --call-timeout {self.call_timeout_s}", hint="give seconds, e.g. --call-timeout 60")
        if not 0 <= self.noise_target < 1:
            raise ConfigError(
                f"bad --noise-target {self.noise_target}", hint="give a fraction, e.g. 0.005 (0: fixed count)"
            )
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise ConfigError(f"bad --max-time {self.max_time_s}", hint="give seconds per row, e.g. --max-time 3")
        if self.cache not in CACHE_MODES:
            raise ConfigError(f"unknown --cache '{self.cache}'", hint="use --cache auto, hot or cold")
        if self.sweep and self.sizes:
            raise ConfigError("--sweep measures each workload's own ladder", hint="leave out --size with --sweep")

    def resolved(self) -> BenchRequest:
        """The same request with its budget and seed filled in (a fresh seed is drawn once, here)."""
        budget = self.budget_s or (SWEEP_BUDGET_S if self.sweep else QUICK_BUDGET_S if self.quick else BUDGET_S)
        seed = self.seed if self.seed is not None else int.from_bytes(os.urandom(4), "little")
        return replace(self, budget_s=budget, seed=seed)

    def settings(self) -> Settings:
        """How each result is measured: 10 samples (5 quick, and 3 of a call slower than 0.1 s unless --repeat)."""
        return Settings(
            repeats=self.repeat or (5 if self.quick else 10),
            warmup=1 if self.quick else 2,
            budget_s=self.resolved().budget_s or BUDGET_S,
            energy=self.energy,
            slow_repeats=3 if self.quick and self.repeat is None else None,
            call_timeout_s=self.call_timeout_s,
            noise_target=self.noise_target,
            min_time_s=0.0 if self.quick or self.sweep else MIN_TIME_S,
            max_time_s=self.max_time_s
            or (SWEEP_MAX_TIME_S if self.sweep else QUICK_MAX_TIME_S if self.quick else MAX_TIME_S),
            cache=self.cache,
            throttle_check=self.throttle_check,
        )

    def to_dict(self, workload_names: list[str]) -> dict[str, Any]:
        """The run's ``settings`` document (docs/bench-json.md)."""
        s = self.settings()
        doc: dict[str, Any] = {
            "workloads": workload_names,
            "backends": list(self.backends),
            "device": self.device,
            "sizes": list(self.sizes),
            "quick": self.quick,
            "repeats": s.repeats,
            "warmup": s.warmup,
            **({"slow_repeats": s.slow_repeats} if s.slow_repeats else {}),
            "budget_s": s.budget_s,
            "energy": self.energy,
            "seed": self.seed,
            "call_timeout_s": self.call_timeout_s,
            "noise_target": s.noise_target,
            "min_time_s": s.min_time_s,
            "max_time_s": s.max_time_s,
            "cache": s.cache,
            "throttle_check": s.throttle_check,
        }
        if self.sweep:
            doc.update(sweep=True, sweep_budget_s=self.sweep_total_s)
        doc.update(dict(self.extra))
        return doc
