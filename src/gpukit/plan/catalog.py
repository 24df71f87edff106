"""Cloud instance prices: ``data/instances.toml``, each row with ``source`` and ``as_of``; ``--prices FILE`` overrides.

A user file has the same ``[instance."name"]`` tables; a row whose name is already known replaces it, new names
are added. Every row must name a GPU known to ``gpukit.hardware.specs`` so its memory and peaks come from there.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gpukit.errors import PlanError
from gpukit.hardware.specs import GpuSpec, all_specs

__all__ = ["Instance", "load_catalog"]

REQUIRED = ("gpu", "gpus", "usd_per_hour", "source", "as_of")


@dataclass(frozen=True)
class Instance:
    name: str
    provider: str
    gpu: str  # key into hardware/data/gpus.toml
    gpus: int
    usd_per_hour: float
    source: str
    as_of: str
    note: str = ""

    @property
    def spec(self) -> GpuSpec:
        return next(s for s in all_specs() if s.key == self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(doc: dict[str, Any], origin: str) -> dict[str, Instance]:
    known = {s.key for s in all_specs()}
    table = doc.get("instance")
    if not isinstance(table, dict):
        raise PlanError(f'{origin} has no [instance."NAME"] tables', hint="see src/gpukit/plan/data/instances.toml")
    out: dict[str, Instance] = {}
    for name, row in table.items():
        missing = [k for k in REQUIRED if not isinstance(row, dict) or k not in row]
        if missing:
            raise PlanError(
                f"{origin}: instance '{name}' lacks {', '.join(missing)}",
                hint="every price needs gpu, gpus, usd_per_hour, source and as_of",
            )
        if not isinstance(row["gpu"], str) or row["gpu"] not in known:
            raise PlanError(
                f"{origin}: instance '{name}' names unknown GPU '{row['gpu']}'",
                hint=f"known GPUs: {', '.join(sorted(known))}",
            )
        try:
            gpus, price = int(row["gpus"]), float(row["usd_per_hour"])
        except (TypeError, ValueError) as exc:
            raise PlanError(f"{origin}: instance '{name}' has a non-numeric gpus or usd_per_hour") from exc
        if gpus < 1 or not (math.isfinite(price) and price > 0):  # TOML allows nan and inf
            raise PlanError(f"{origin}: instance '{name}' needs gpus ≥ 1 and a positive, finite usd_per_hour")
        out[name] = Instance(
            name,
            str(row.get("provider", "")),
            row["gpu"],
            gpus,
            price,
            str(row["source"]),
            str(row["as_of"]),
            str(row.get("note", "")),
        )
    return out


def load_catalog(prices: Path | None = None) -> list[Instance]:
    """The shipped catalog, with ``prices`` (a TOML file) overriding and extending it."""
    text = resources.files("gpukit.plan").joinpath("data/instances.toml").read_text(encoding="utf-8")
    rows = _rows(tomllib.loads(text), "instances.toml")
    if prices is not None:
        try:
            doc = tomllib.loads(Path(prices).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise PlanError(f"no such prices file: {prices}") from exc
        except OSError as exc:  # a directory, no permission
            raise PlanError(f"cannot read the prices file {prices}: {exc.strerror}") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PlanError(f"{prices} is not valid TOML: {exc}") from exc
        rows.update(_rows(doc, str(prices)))
    return list(rows.values())
