"""fleet_status on documents: groups per model and stack, the fleet median needs two nodes, the exporter's
annotation writes the fleet's judgement into the documents."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpukit.errors import ConfigError
from gpukit.fleet.exporter import annotate
from gpukit.fleet.status import fleet_status, parse_records, require_fleet

_spec = importlib.util.spec_from_file_location("fleet_synthetic_st", Path(__file__).with_name("fleet_synthetic.py"))
assert _spec and _spec.loader
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)


def test_fleets_are_grouped_by_model_and_stack() -> None:
    recs = synth.fleet(3, 4, seed=1)
    other = synth.acceptance("node-other-driver", 4, seed=1, driver="575.57.08")
    st = fleet_status([*recs, other])
    keys = {(g.stack_key, g.figure): g for g in st.groups}
    mine = keys[("drv580.159.04 cuda13.0 torch2.11.0 gpukit0.1", "gemm_bf16_tflops")]
    assert (mine.n_values, mine.n_nodes, mine.reason) == (12, 3, None)
    lone = keys[("drv575.57.08 cuda13.0 torch2.11.0 gpukit0.1", "gemm_bf16_tflops")]
    assert lone.median is None and "measured on 1 node(s): no fleet median" in (lone.reason or "")
    row = next(r for r in st.rows if r.node == "node-other-driver")
    assert row.cells["gemm_bf16_tflops"].vs_fleet is None  # judged against its node and reference only
    assert any("no fleet median" in r for r in st.reasons)


def test_one_node_or_none_is_refused_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"no acceptance runs in x\.db"):
        require_fleet([], "x.db")
    with pytest.raises(ConfigError, match=r"only one node \(solo\)") as e:
        require_fleet([synth.acceptance("solo", 2)], "x.db")
    assert e.value.hint and "gpukit accept --db URL" in e.value.hint
    require_fleet(synth.fleet(2, 1), "x.db")


def test_a_record_that_is_not_an_acceptance_is_bad_input() -> None:
    with pytest.raises(ConfigError, match="acceptance 7 in the store cannot be read"):
        parse_records([{"id": 7, "kind": "bench_run"}])


def test_annotate_writes_the_fleet_figures_into_copies_of_the_documents() -> None:
    recs = synth.fleet(3, 4, seed=2, slowed={(1, 1): ("gemm_bf16_tflops", 0.08)})
    st = fleet_status(recs)
    docs = annotate(recs, st)
    fig = docs[1]["gpus"][1]["figures"]["gemm_bf16_tflops"]
    assert fig["vs_fleet"] == pytest.approx(0.92, abs=0.015) and "slow_vs_fleet" in fig["flags"]
    assert fig["fleet_median"] == pytest.approx(760.0, rel=0.01) and fig["fleet_mads"] < -5
    assert docs[1]["gpus"][1]["verdict"] == "slow" and docs[1]["verdict"] == "slow" and docs[0]["verdict"] == "ok"
    assert recs[1]["gpus"][1]["figures"]["gemm_bf16_tflops"]["flags"] == []  # the inputs are left as they were
