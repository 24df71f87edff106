"""What a run needs after the decode but not before it — torch and the CUDA context — started on a
thread so that it overlaps the decode.

The decode starts this from its ``on_started`` hook, once its worker processes are forked: no thread of ours runs
while the process forks, and torch is not even imported yet in the parent, so the fork is small. Measured on this
project's machines: ``import torch`` 2-5 s on a 2-core CPU box; the CUDA context about 0.5 s on an H200.
``torch._dynamo`` (another 2 s) is not needed: the trainer's Adam (``adam.py``) avoids ``torch.optim.Optimizer``,
whose methods import it. The run waits for the thread once, after
the decode, and reports that wait as ``imports_s`` (what the decode could not hide).
"""

from __future__ import annotations

import threading
import time

__all__ = ["Preload"]


class Preload:
    """``start()`` once (later calls do nothing); ``wait()`` blocks until it is done and returns the seconds waited."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._thread: threading.Thread | None = None

    def _work(self) -> None:
        try:
            import torch

            if self.device != "cpu" and torch.cuda.is_available():
                torch.cuda.init()
        except Exception:  # the main thread meets the same failure, with its own error, where it needs the part
            pass

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="gpukit-preload", daemon=True)
            self._thread.start()

    def wait(self) -> float:
        self.start()
        t0 = time.perf_counter()
        assert self._thread is not None
        self._thread.join()
        return time.perf_counter() - t0
