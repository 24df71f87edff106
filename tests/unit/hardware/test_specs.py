from __future__ import annotations

import pytest

from gpukit.errors import ConfigError
from gpukit.hardware.specs import all_specs, get_spec, match_spec


@pytest.mark.parametrize(
    ("reported", "key"),
    [
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10G", "a10g"),
    ],
)
def test_match_reported_names(reported, key):
    spec = match_spec(reported)
    assert spec is not None and spec.key == key


def test_unknown_device_is_none_not_a_guess():
    assert match_spec("Some Future GPU 9000") is None


def test_h200_datasheet_figures():
    h200 = get_spec("h200-sxm")
    assert h200.memory_gb == 141
    assert h200.bandwidth_gbps == 4800
    assert h200.peak_tflops("bf16") == 989
    assert h200.peak_tflops("fp8") == 1979
    assert get_spec("t4").peak_tflops("bf16") is None  # T4 has no bf16


def test_unknown_key_lists_known():
    with pytest.raises(ConfigError) as info:
        get_spec("nope")
    assert "h200-sxm" in (info.value.hint or "")


def test_every_row_is_complete():
    specs = all_specs()
    assert len({s.key for s in specs}) == len(specs)
    for s in specs:
        assert s.memory_gb > 0 and s.bandwidth_gbps > 0 and s.tflops.get("fp32", 0) > 0
