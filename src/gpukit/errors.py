"""The one exception tree of gpukit.

Every error the library raises on purpose is a :class:`GpukitError`. Each carries a one-line ``message`` (what was
wrong), an optional ``hint`` (what to do about it) and the ``exit_code`` the CLI maps it to: 2 for bad usage or input,
1 for a failure found while working. The CLI catches them once, at its edge, and prints ``error:`` / ``hint:`` lines.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "CheckFailed",
    "ConfigError",
    "DeviceError",
    "GpukitError",
    "PlanError",
    "ServeError",
    "StoreError",
    "TrainError",
    "WorkloadError",
]


class GpukitError(Exception):
    """Base of every error gpukit raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(GpukitError):
    """Bad usage or input: a flag, a file, a size, a preset name. Exit code 2."""

    exit_code = 2


class DeviceError(GpukitError):
    """The hardware or its driver stack did not do what was asked (no GPU, NVML failure, out of memory)."""


class BackendUnavailable(GpukitError):
    """A compute backend cannot run here; ``hint`` carries the install command or the fix."""


class WorkloadError(GpukitError):
    """A workload could not be built or run."""


class CheckFailed(WorkloadError):
    """A result did not match its reference within tolerance: it is a failure, never a time."""


class StoreError(GpukitError):
    """The results history could not be read or written."""


class PlanError(ConfigError):
    """An impossible or malformed planning request (unknown preset, bad config.json, --tp not dividing heads)."""


class TrainError(GpukitError):
    """Training, prediction or export failed."""


class ServeError(GpukitError):
    """The inference server could not start or serve."""
