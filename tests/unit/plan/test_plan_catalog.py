"""Price catalog: every row sourced and dated, the seed's figures, and the --prices override."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpukit.errors import PlanError
from gpukit.hardware.specs import all_specs
from gpukit.plan.catalog import load_catalog


def test_every_row_has_source_date_and_known_gpu() -> None:
    rows = load_catalog()
    keys = {s.key for s in all_specs()}
    assert len(rows) >= 12
    for r in rows:
        assert r.source and r.as_of and r.usd_per_hour > 0 and r.gpu in keys


def test_reference_prices_and_dates() -> None:
    rows = {r.name: r for r in load_catalog()}
    assert rows["p3.2xlarge"].usd_per_hour == 3.06
    assert rows["p5.48xlarge"].usd_per_hour == 55.04 and "98.32" in rows["p5.48xlarge"].note
    assert rows["g4dn.xlarge"].usd_per_hour == 0.526 and rows["g4dn.xlarge"].as_of == "2023-11"
    assert rows["p5en.48xlarge"].as_of == "after June 2025, snapshot date unknown"
    assert rows["p5en.48xlarge"].spec.key == "h200-sxm" and rows["p5en.48xlarge"].gpus == 8


def test_override_replaces_and_extends(tmp_path: Path) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(
        '[instance."p5.48xlarge"]\ngpu = "h100-sxm"\ngpus = 8\nusd_per_hour = 40.0\nsource = "my quote"\n'
        'as_of = "2026-11-01"\n\n[instance."onprem-h200"]\ngpu = "h200-sxm"\ngpus = 1\nusd_per_hour = 2.5\n'
        'source = "internal"\nas_of = "2026-11-30"\n'
    )
    rows = {r.name: r for r in load_catalog(f)}
    assert rows["p5.48xlarge"].usd_per_hour == 40.0 and rows["p5.48xlarge"].source == "my quote"
    assert rows["onprem-h200"].gpus == 1
    assert rows["p3.2xlarge"].usd_per_hour == 3.06  # untouched rows stay


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[instance."x"]\ngpu = "h100-sxm"\ngpus = 1\nusd_per_hour = 1.0\n', "lacks source, as_of"),
        ('[instance."x"]\ngpu = "tpu-v5"\ngpus = 1\nusd_per_hour = 1\nsource = "s"\nas_of = "d"\n', "unknown GPU"),
        ("this is = = not toml", "not valid TOML"),
        ('[instance."x"]\ngpu = "t4"\ngpus = 0\nusd_per_hour = 1\nsource = "s"\nas_of = "d"\n', "gpus ≥ 1"),
        ('[instance."x"]\ngpu = "t4"\ngpus = 1\nusd_per_hour = nan\nsource = "s"\nas_of = "d"\n', "positive"),
        ('[instance."x"]\ngpu = "t4"\ngpus = 1\nusd_per_hour = inf\nsource = "s"\nas_of = "d"\n', "positive"),
        ('[instance."x"]\ngpu = ["t4"]\ngpus = 1\nusd_per_hour = 1\nsource = "s"\nas_of = "d"\n', "unknown GPU"),
    ],
)
def test_bad_override(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(text)
    with pytest.raises(PlanError, match=message):
        load_catalog(f)


def test_missing_override_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no such prices file"):
        load_catalog(tmp_path / "nope.toml")


def test_override_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read"):
        load_catalog(tmp_path)
