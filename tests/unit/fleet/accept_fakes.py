"""Test doubles for `gpukit accept`: a fake NVML with memory repair, XID events and a GPU that can fall off the bus,
and a measurer that returns bench rows without measuring (the verdict logic on any number of GPUs, in milliseconds).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))

from fake_nvml import FakeGpu, FakeNvml, NVMLError

from gpukit.bench.results import Result
from gpukit.fleet.accept_figures import FigurePlan, Measurer, Target


class NVMLError_Timeout(NVMLError):
    pass


class AcceptNvml(FakeNvml):
    """FakeNvml plus what `accept` reads: retired pages, remapped rows, serials, XID events; ``lost`` GPUs raise."""

    nvmlEventTypeXidCriticalError = 0x8

    def __init__(self, gpus: list[FakeGpu] | None = None) -> None:
        super().__init__(gpus)
        self.lost: set[int] = set()
        self.retired: dict[int, tuple[int, int]] = {}  # index → (single-bit pages, double-bit pages)
        self.remapped: dict[int, tuple[int, int, int, int]] = {}
        self.pending_xids: list[tuple[int, int]] = []  # (index, xid) delivered by the next event wait

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i in self.lost:
            raise NVMLError("GPU is lost")
        return super().nvmlDeviceGetHandleByIndex(i)

    def nvmlDeviceGetUUID(self, h: int) -> str:
        if h in self.lost:
            raise NVMLError("GPU is lost")
        return super().nvmlDeviceGetUUID(h)

    def nvmlDeviceGetSerial(self, h: int) -> str:
        return f"132459{h:04d}"

    def nvmlDeviceGetIndex(self, h: int) -> int:
        return int(h)

    def nvmlDeviceGetApplicationsClock(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetRetiredPages(self, h: int, cause: int) -> list[int]:
        sbe, dbe = self.retired.get(h, (0, 0))
        return list(range(dbe if cause == 1 else sbe))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return 0

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        return self.remapped.get(h, (0, 0, 0, 0))

    def nvmlEventSetCreate(self) -> str:
        return "events"

    def nvmlDeviceRegisterEvents(self, h: int, kind: int, events: Any) -> None:
        return None

    def nvmlEventSetWait_v2(self, events: Any, timeout_ms: int) -> Any:
        if self.pending_xids:
            index, xid = self.pending_xids.pop(0)
            return SimpleNamespace(device=index, eventData=xid)
        import time

        time.sleep(timeout_ms / 1000.0)
        raise NVMLError_Timeout("Timeout")

    def nvmlEventSetFree(self, events: Any) -> None:
        return None


def h200s(n: int) -> list[FakeGpu]:
    return [FakeGpu(uuid=f"GPU-{i:04d}", bus_id=f"00000000:{16 + i:02X}:00.0".encode()) for i in range(n)]


class RowMeasurer(Measurer):
    """Returns bench rows from ``rates[(target index, figure)]`` (default ``base[figure]``) without measuring;
    ``fail[(index, figure)]`` makes that row fail with the reason given."""

    def __init__(self, base: dict[str, float], rates: dict[tuple[int, str], float] | None = None,
                 fail: dict[tuple[int, str], str] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.base, self.rates, self.fail = base, rates or {}, fail or {}
        self.calls: list[tuple[int, str]] = []

    def prefetch(self, plans: Any) -> None:
        return None

    def measure(self, plan: FigurePlan, target: Target, settings: Any = None, workload: Any = None) -> Result:
        self.calls.append((target.index, plan.name))
        unit = "tflops" if plan.name.endswith("tflops") else "gbps"
        row = Result(plan.workload, plan.impl, "cuda" if target.cuda_index is not None else "cpu", plan.size,
                     throughput_unit=unit, dtype="bf16" if "bf16" in plan.size else None)  # fmt: skip
        if (why := self.fail.get((target.index, plan.name))) is not None:
            row.status, row.reason = "failed", why
            return row
        value = self.rates.get((target.index, plan.name), self.base[plan.name])
        per_call = 1e-3
        row.samples_s = [per_call * (1 + 0.001 * (i % 3)) for i in range(5)]
        row.kernel_median_s, row.repeats, row.inner, row.error = per_call, 5, 10, 1e-3
        row.flops = value * 1e12 * per_call
        setattr(row, unit, value)
        return row
