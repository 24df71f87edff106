from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_nvml import FakeNvml

from gpukit.hardware import _nvml


@pytest.fixture
def fake_nvml() -> Iterator[FakeNvml]:
    """Install a fake 2 x H200 NVML session for the test; restore the real (lazy) one afterwards."""
    fake = FakeNvml()
    _nvml.use(fake)
    yield fake
    _nvml.reset()


@pytest.fixture
def no_nvml() -> Iterator[None]:
    _nvml.use(None, "NVML did not initialise: NVMLError_LibraryNotFound: NVML Shared Library Not Found")
    yield
    _nvml.reset()
