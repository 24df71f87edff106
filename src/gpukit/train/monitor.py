"""GPU utilisation over an epoch, sampled from NVML in a background thread (None where NVML cannot say)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["UtilSampler"]


def _nvml_handle(device_index: int) -> Any:
    """The NVML handle of torch's device ``device_index``, matched by UUID (CUDA_VISIBLE_DEVICES renumbers)."""
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        return pynvml.nvmlDeviceGetHandleByUUID(name)
    except Exception:  # no NVML, no driver, an old torch without .uuid: utilisation is simply unknown
        return None


class UtilSampler:
    """``start()`` … ``stop()`` → mean GPU utilisation in percent, or None."""

    def __init__(self, device_index: int | None, period_s: float = 0.2) -> None:
        self._handle = _nvml_handle(device_index) if device_index is not None else None
        self._period_s = period_s
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        import pynvml

        while not self._stop.wait(self._period_s):
            try:
                self._samples.append(int(pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
            except Exception:
                return

    def start(self) -> None:
        if self._handle is None:
            return
        self._samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpukit-util", daemon=True)
        self._thread.start()

    def mean(self) -> float | None:
        """Mean of the samples so far (the progress bar shows it live)."""
        samples = list(self._samples)
        return sum(samples) / len(samples) if samples else None

    def stop(self) -> float | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        return sum(self._samples) / len(self._samples) if self._samples else None
