"""The calibration file: write/read round trip, interpolation, where it is found, and bad files (error + hint, exit 2).

The fixture ``synthetic-h200.json`` holds round, made-up numbers (its meta says so): the tests check arithmetic,
not the H200.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gpukit.errors import PlanError
from gpukit.hardware.specs import get_spec
from gpukit.plan.calibration import (
    datasheet_calibration,
    find_calibration,
    from_dict,
    interp_rate,
    load_calibration,
    save_calibration,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "plan" / "calibration" / "synthetic-h200.json"


def _doc() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_round_trip_keeps_every_part(tmp_path: Path) -> None:
    cal = load_calibration(FIXTURE)
    out = save_calibration(cal, tmp_path / "sub" / "h200-sxm.json")
    again = load_calibration(out)
    for name in ("gemm", "attention_fwd", "attention_bwd", "conv", "optimizer", "host", "host_decode", "host_cnn"):
        assert getattr(again, name) == getattr(cal, name), name
    assert (again.bandwidth_gbps, again.decode_gbps, again.launch_s) == (4000.0, 3000.0, 5e-6)
    assert again.measured and str(out) in again.source and "2026-12-01" in again.source
    assert not list((tmp_path / "sub").glob("*.tmp"))  # written atomically: no temporary left behind


def test_interpolation_is_linear_in_log_flops_and_clamped() -> None:
    pts = [(1e9, 100.0), (1e12, 700.0)]
    assert interp_rate(pts, 1e6) == 100.0 and interp_rate(pts, 1e15) == 700.0
    assert interp_rate(pts, math.sqrt(1e9 * 1e12)) == pytest.approx(400.0)  # the geometric mid-point
    assert interp_rate(pts, 1e10) == pytest.approx(100 + 600 / 3)
    assert interp_rate([(5.0, 42.0)], 1e20) == 42.0


def _broken(key: str, value: Any) -> dict[str, Any]:
    doc = _doc()
    if value is KeyError:
        del doc[key]
    else:
        doc[key] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ([1, 2], "not a JSON object"),
        (_broken("schema", 99), "schema 99"),
        (_broken("gemm", KeyError), "missing gemm"),
        (_broken("bandwidth_gbps", -1.0), "bandwidth_gbps"),
        (_broken("bandwidth_gbps", 0), "above 0"),
        (_broken("launch_s", True), "launch_s"),
        (_broken("launch_s", "5e-6"), "launch_s"),
        (_broken("gemm", {"bf16": []}), "non-empty"),
        (_broken("gemm", {"bf16": [[1e9, 0.0]]}), "rate of 0"),
        (_broken("gemm", {"bf16": [[1e9]]}), "[flops, tflops]"),
        (_broken("gemm", {"bf16": [[1e9, float("nan")]]}), "finite"),
        (_broken("host", {"llama|fp32|none": {"forward": [1.0]}}), "fixed_s, per_layer_s"),
        (_broken("host", {"llama|fp32|none": 3}), "object"),
        (_broken("optimizer", {"foreach": {"fp32": {"s_per_param": "x"}}}), "optimizer.foreach.fp32"),
    ],
)
def test_bad_documents_name_the_field(doc: Any, words: str) -> None:
    with pytest.raises(PlanError) as err:
        from_dict(doc, "cal.json")
    assert words in err.value.message and "cal.json" in err.value.message
    assert err.value.hint and "--calibrate" in err.value.hint


def test_unreadable_files_are_plan_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    for path, words in ((tmp_path / "bad.json", "not valid JSON"), (tmp_path / "none.json", "no such")):
        with pytest.raises(PlanError, match=words):
            load_calibration(path)


def test_cli_bad_calibration_is_error_hint_exit_2(run_cli: Any, tmp_path: Path) -> None:
    bad = tmp_path / "h200.json"
    bad.write_text(json.dumps(_broken("decode_gbps", "fast")))
    r = run_cli("plan", "gpt2", "--batch", "2", "--seq", "128", "--calibration", str(bad))
    assert r.exit_code == 2
    assert "error:" in r.stderr and "decode_gbps" in r.stderr and "hint:" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_user_file_wins_over_shipped_and_datasheet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    h100 = get_spec("h100-sxm")
    assert not find_calibration(h100).measured and "datasheet" in find_calibration(h100).source
    doc = _doc() | {"gpu_key": "h100-sxm", "gpu_name": "NVIDIA H100 80GB HBM3"}
    user = tmp_path / "gpukit" / "plan-calibration" / "h100-sxm.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps(doc))
    found = find_calibration(h100)
    assert found.measured and str(user) in found.source
    user.write_text("[]")  # a broken user file is an error, never silently skipped
    with pytest.raises(PlanError):
        find_calibration(h100)
    assert find_calibration(h100, FIXTURE).gpu_key == "h200-sxm"  # explicit wins


def test_datasheet_fallback_is_flat_and_labelled() -> None:
    a100 = get_spec("a100-80gb")
    cal = datasheet_calibration(a100)
    assert cal.gemm["bf16"] == [(1.0, pytest.approx(312 * 0.87))] and not cal.measured
    assert cal.bandwidth_gbps == pytest.approx(a100.bandwidth_gbps * 0.87)
    assert "datasheet" in cal.source and "--calibrate" in cal.source


def test_cli_names_the_calibration_it_used(run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    args = ("plan", "llama-2-7b", "--recipe", "bf16", "--batch", "1", "--seq", "1024", "--json")
    r = run_cli(*args, "--gpu", "h200-sxm", "--calibration", str(FIXTURE))
    assert r.exit_code == 0, r.stderr
    t = json.loads(r.stdout)["time"]
    assert str(FIXTURE) in t["ceilings_source"] and t["calibrated"] is True
    assert [p["name"] for p in t["phases"]] == ["forward", "backward", "optimizer"]
    assert all(p["bound"] in ("gemm", "attention", "memory", "host") for p in t["phases"])
    other = json.loads(run_cli(*args, "--gpu", "a100-80gb", "--calibration", str(FIXTURE)).stdout)["time"]
    assert not other["calibrated"] and "datasheet" in other["ceilings_source"]  # the file is for the H200 only


def test_cli_checkpointing_variant_is_checked(run_cli: Any) -> None:
    r = run_cli("plan", "gpt2", "--checkpointing", "--checkpointing-variant", "sometimes")
    assert r.exit_code == 2 and "--checkpointing-variant must be one of" in r.stderr
    ok = run_cli("plan", "gpt2", "--checkpointing", "--checkpointing-variant", "reentrant", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["settings"]["checkpoint_variant"] == "reentrant"


def test_cli_prints_each_phase_with_its_bound(run_cli: Any) -> None:
    r = run_cli("plan", "seed-cnn", "--recipe", "fp32", "--batch", "32", "--gpu", "h200-sxm", "--calibration",
                str(FIXTURE))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    text = " ".join(r.stdout.split())  # the console wraps long lines
    line = text[text.index("per phase:") :]
    assert "forward" in line and "optimizer" in line and "(host-bound)" in line
    assert "host-bound: most of this time is the CPU launching kernels" in text  # the seed CNN's short step


def test_cli_says_nothing_of_the_host_where_the_gpu_is_the_bound(run_cli: Any) -> None:
    r = run_cli("plan", "llama-2-7b", "--recipe", "bf16", "--batch", "4", "--seq", "1024", "--checkpointing",
                "--gpu", "h200-sxm", "--calibration", str(FIXTURE))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "per phase:" in text and "(gemm-bound)" in text and "host-bound: most of this time" not in text


def test_the_fallback_host_floor_is_the_earlier_h200_fit() -> None:
    from gpukit.plan.calibration import fitted_host_2026_11_30

    host, decode, cnn = fitted_host_2026_11_30()
    # 1.36 ms per layer forward + backward, +0.65 ms under autocast, +0.36 + 1.56 ms with checkpointing under it
    fwd, bwd = host["llama|amp|non-reentrant"]["forward"], host["llama|amp|non-reentrant"]["backward"]
    assert fwd[1] + bwd[1] == pytest.approx((1.36 + 0.65 + 0.36 + 1.56) / 1e3)
    assert decode["gpt2"]["token"] == (0.5e-3, 0.42e-3)
    assert sum(cnn["resnet50|fp32"].values()) == pytest.approx(54 * 0.2e-3)


def test_other_gpus_take_the_shipped_h200_host_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    h200 = find_calibration(get_spec("h200-sxm"))
    a100 = find_calibration(get_spec("a100-80gb"))
    assert h200.measured and not a100.measured and "host floor from the H200 calibration" in a100.source
    assert a100.host == h200.host and a100.gemm["bf16"] != h200.gemm["bf16"]
