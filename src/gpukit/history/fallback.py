"""When saving to the history fails, the record is written to a JSON file beside it (beside a file store; in
gpukit's data folder for a server); `gpukit history import FILE` brings it in later, into either backend. One file
per record: ``{"gpukit_history": 1, "kind": ..., "record": {...}}``; a run or an acceptance keeps the identity of the
node that measured it, so importing it elsewhere files it under the right node."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError, StoreError
from gpukit.history.store import History, dumps

__all__ = ["KINDS", "import_file", "save_or_keep", "write_fallback"]

FORMAT = 1
KINDS = ("bench_run", "plan_validation", "loadtest", "acceptance")
_NODE_KINDS = ("bench_run", "acceptance")  # the records that carry the identity of the node that measured them


def write_fallback(db: History | Path, kind: str, record: Mapping[str, Any]) -> Path:
    """Write ``record`` to ``<db folder>/<db name>.unsaved-<UTC time>-<kind>.json`` — or, when that folder cannot
    be written, to the current folder, then the temporary folder. Given the History, a run or an acceptance is
    stamped with the node's identity first. Returns the file written; raises OSError only when none of the three
    could be written."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if isinstance(db, History):
        record = db.stamped(record) if kind in _NODE_KINDS else record
        db_path = db.path
    else:
        db_path = db
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    name = f"{db_path.name}.unsaved-{stamp}-{kind}.json"
    text = (
        dumps(
            {
                "gpukit_history": FORMAT,
                "kind": kind,
                "db": db.location if isinstance(db, History) else str(db_path),
                "record": record,
            }
        )
        + "\n"
    )
    last: OSError | None = None
    for folder in (db_path.parent, Path.cwd(), Path(tempfile.gettempdir())):
        target = folder / name
        try:
            folder.mkdir(parents=True, exist_ok=True)  # a server's fallback folder may not exist yet
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return target
        except OSError as exc:
            last = exc
    assert last is not None
    raise last


def import_file(history: History, path: Path) -> tuple[str, int]:
    """Store the record of a fallback file in ``history``; returns (kind, new id). A file that is not one →
    ConfigError."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no such file: {path}", hint="give the JSON file gpukit wrote when saving failed") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory", hint="give one .json file that gpukit wrote") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} as JSON: {exc}", hint="give a file gpukit wrote") from exc
    if not isinstance(doc, dict) or doc.get("gpukit_history") != FORMAT or doc.get("kind") not in KINDS:
        raise ConfigError(f"{path} is not a gpukit history record", hint="give a *.unsaved-*.json file gpukit wrote")
    record = doc.get("record")
    if not isinstance(record, dict):
        raise ConfigError(f"{path} holds no record object", hint="give a *.unsaved-*.json file gpukit wrote")
    kind = str(doc["kind"])
    if kind == "bench_run":
        if not isinstance(record.get("results", []), list):
            raise ConfigError(f"{path}: the run's results are not a list", hint="give a file gpukit wrote")
        return kind, history.save_run(record)
    if kind == "plan_validation":
        return kind, history.save_validation(record)
    if kind == "acceptance":
        if not isinstance(record.get("node"), dict) or not isinstance(record.get("gpus", []), list):
            raise ConfigError(
                f"{path}: the acceptance has no node or its GPUs are not a list", hint="give a file gpukit wrote"
            )
        return kind, history.save_acceptance(record)
    return kind, history.save_loadtest(record)


def save_or_keep(
    history: History, kind: str, record: Mapping[str, Any]
) -> tuple[int | None, Path | None, StoreError | None]:
    """Save ``record`` (a ``kind`` of :data:`KINDS`); when the store refuses it, keep it in a fallback file.
    Returns (new id, None, None), or (None, the file kept, the store's error) — nothing half-written either way."""
    savers: dict[str, Callable[[Mapping[str, Any]], int]] = {
        "bench_run": history.save_run,
        "plan_validation": history.save_validation,
        "loadtest": history.save_loadtest,
        "acceptance": history.save_acceptance,
    }
    save = savers[kind]
    try:
        return save(record), None, None
    except StoreError as exc:
        return None, write_fallback(history, kind, record), exc
