"""Fixtures for the train tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from train_testdata import make_folder


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "data")
