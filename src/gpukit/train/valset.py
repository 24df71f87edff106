"""The validation images of a finished run, found again from what the run wrote (``settings.json`` names the data
folder, the split's fraction and seed; ``skipped.txt`` the files it could not decode), without decoding the set.

The split is the one ``load_folder`` made: a ``val/`` folder when the data has ``train/`` and ``val/``, else the same
seeded per-class split of the same files (scanned in the same order, less those skipped), so the paths are exactly the
run's validation images while the data folder is unchanged. A data folder that moved or changed gives other images
(or none): the caller says where its images came from.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpukit.train.data import _class_dirs, _collect, _split

__all__ = ["validation_paths"]


def validation_paths(run_dir: Path) -> list[str] | None:
    """The run's validation image paths, or None when the run's settings or data folder are not there."""
    try:
        settings = json.loads((Path(run_dir) / "settings.json").read_text())
        root = Path(settings["data"])
        val_fraction, seed = float(settings.get("val_fraction", 0.2)), int(settings.get("seed", 0))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not root.is_dir():
        return None
    skipped = _skipped(Path(run_dir) / "skipped.txt")
    if (root / "train").is_dir() and (root / "val").is_dir():
        classes = [p.name for p in _class_dirs(root / "train")]
        paths = _collect(root / "val", classes)[0]
        return [p for p in paths if p not in skipped]
    classes = [p.name for p in _class_dirs(root)]
    paths, labels, _ = _collect(root, classes)
    kept = [i for i, p in enumerate(paths) if p not in skipped]  # load_folder splits what decoded
    _, val = _split([labels[i] for i in kept], val_fraction, seed)
    return [paths[kept[i]] for i in val]


def _skipped(path: Path) -> set[str]:
    try:
        return {line.split("\t", 1)[0] for line in path.read_text().splitlines() if line}
    except OSError:
        return set()
