"""Runs one workload × implementation × size into a verified :class:`Result` (see ``run_one``), and whole runs."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Progress"]


@dataclass(frozen=True)
class Progress:
    """Passed to the progress callback before each result: ``index`` of ``total``, and what is about to run."""

    index: int
    total: int
    workload: str
    backend: str
    size: str
