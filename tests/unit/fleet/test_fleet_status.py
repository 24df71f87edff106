"""fleet_status on documents: groups per model and stack, the fleet median needs two nodes, the exporter's
annotation writes the fleet's judgement into the documents."""

from __future__ import annotations

from pathlib import Path

import pytest

import fleet_synthetic as synth
from gpukit.errors import ConfigError
from gpukit.fleet.exporter import annotate
from gpukit.fleet.status import fleet_status, parse_records, require_fleet


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
    bf16_median = synth.load_spread()["figures"]["gemm_bf16_tflops"]["median"]
    assert fig["fleet_median"] == pytest.approx(bf16_median, rel=0.01) and fig["fleet_mads"] < -5
    assert docs[1]["gpus"][1]["verdict"] == "slow" and docs[1]["verdict"] == "slow" and docs[0]["verdict"] == "ok"
    assert recs[1]["gpus"][1]["figures"]["gemm_bf16_tflops"]["flags"] == []  # the inputs are left as they were


REAL = Path(__file__).resolve().parents[2] / "fixtures" / "fleet" / "accept_cpu_node.json"


def _copies(scale: dict[str, float]) -> list[dict]:
    """Five nodes made from one real `gpukit accept --device cpu` document (tests/fixtures/fleet), values scaled."""
    import copy
    import json

    base = json.loads(REAL.read_text(encoding="utf-8"))
    out = []
    for i, jitter in enumerate((1.0, 1.003, 0.998, 1.001, 0.999)):
        doc = copy.deepcopy(base)
        doc["node"]["name"] = f"cpu-{i}"
        for name, fig in doc["gpus"][0]["figures"].items():
            fig["value"] *= jitter * scale.get(f"cpu-{i}/{name}", 1.0)
        out.append(doc)
    return out


def test_a_real_accept_document_goes_through_status_and_the_exporter() -> None:
    from gpukit.fleet.prom import render

    recs = _copies({"cpu-3/mem_copy_gbps": 0.90})
    st = fleet_status(recs)
    assert st.figures == ["gemm_fp32_tflops", "mem_copy_gbps", "mem_triad_gbps", "soak_gemm_tflops"]  # as accept
    assert [(r.node, r.verdict) for r in st.flagged] == [("cpu-3", "slow")]
    cell = next(r for r in st.rows if r.node == "cpu-3").cells["mem_copy_gbps"]
    assert cell.flags == ["slow_vs_fleet"] and cell.vs_fleet == pytest.approx(0.90, abs=0.005)
    # no shipped reference and five values: the line is the bare 5 % threshold, and a note says so
    group = st.group("AMD EPYC", "drv- cuda- torch2.14.1 gpukit0.1", "mem_copy_gbps")
    assert group is not None and group.sigma is None and group.sigma_source == "none"
    text = render(annotate(recs, st))
    assert 'gpukit_accept_figure_flagged{node="cpu-3",gpu="0",uuid="",model="AMD EPYC",figure="mem_copy"} 1.0' in text


def test_a_spread_file_gives_sigma_over_the_runs_it_names(tmp_path: Path) -> None:
    import json

    from gpukit.fleet.status import load_sigmas

    f = tmp_path / "spread.json"
    f.write_text(json.dumps({"runs": 10, "figures": {"a_gbps": {"spread": 0.03078}, "b_gbps": {"spread": 0.02704,
                 "runs": 7}, "c_gbps": {"spread": None}}}), encoding="utf-8")  # fmt: skip
    assert load_sigmas(f) == pytest.approx({"a_gbps": 0.01, "b_gbps": 0.01})
    f.write_text("[]", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read the spread file"):
        load_sigmas(f)
