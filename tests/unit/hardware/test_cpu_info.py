from __future__ import annotations

from pathlib import Path

from gpukit.hardware.cpu import parse_cpuinfo, read_cpu

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse avx2 fma avx512f avx512_bf16 avx512_fp16 avx512_vnni amx_tile amx_bf16 amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu sse avx2 fma avx512f avx512_bf16 avx512_fp16 avx512_vnni amx_tile amx_bf16 amx_int8

processor\t: 2
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 1
core id\t\t: 0
flags\t\t: fpu sse avx2
"""

ARM = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes sve
CPU implementer\t: 0x41
"""


def test_parse_x86_cpuinfo():
    p = parse_cpuinfo(X86)
    assert p["model"] == "Intel(R) Xeon(R) Platinum 8480+" and p["vendor"] == "GenuineIntel"
    assert p["sockets"] == 2 and p["cores"] == 3
    assert {"amx_bf16", "avx512_fp16", "avx512_vnni"} <= p["flags"]  # type: ignore[operator]


def test_parse_arm_cpuinfo():
    p = parse_cpuinfo(ARM)
    assert p["model"] is None and p["vendor"] == "0x41" and "sve" in p["flags"]  # type: ignore[operator]
    assert p["sockets"] is None


def test_read_cpu_on_this_machine():
    cpu = read_cpu()
    assert cpu.threads is not None and cpu.threads >= 1
    assert cpu.cores is not None and 1 <= cpu.cores <= cpu.threads
    assert cpu.memory_total_bytes and cpu.memory_available_bytes is not None
    assert cpu.memory_available_bytes <= cpu.memory_total_bytes
    d = cpu.to_dict()
    assert isinstance(d["extensions"], list) and isinstance(d["numa_nodes"], list)
    flags = Path("/proc/cpuinfo").read_text()
    assert ("avx2" in cpu.extensions) == (" avx2" in flags)


def test_read_cpu_without_psutil(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil now raises ImportError
    cpu = read_cpu()
    assert cpu.threads is not None and cpu.threads >= 1
    assert cpu.memory_total_bytes and cpu.memory_available_bytes is not None
    assert cpu.memory_available_bytes <= cpu.memory_total_bytes
    assert cpu.clock_current_mhz is None or cpu.clock_current_mhz > 0


ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 fma avx512f avx512_bf16 avx512_vnni\n"


def test_amx_bf16_is_usable_only_with_amx_and_no_isa_cap():
    """bf16 autocast on the CPU pays off only on AMX (the training step at 0.60x fp32's time; AVX512-BF16 alone:
    1.16x), so ``--amp auto`` asks this. ONEDNN_MAX_CPU_ISA below AMX keeps oneDNN off the tiles."""
    from gpukit.hardware.cpu import amx_bf16_usable

    assert amx_bf16_usable(X86, max_isa="")
    assert amx_bf16_usable(X86, max_isa="all") and amx_bf16_usable(X86, max_isa="AVX512_CORE_AMX")
    assert not amx_bf16_usable(X86, max_isa="AVX512_CORE_BF16")
    assert not amx_bf16_usable(ZEN4, max_isa="") and not amx_bf16_usable(ARM, max_isa="")
    assert not amx_bf16_usable("", max_isa="")  # /proc/cpuinfo unreadable: fp32


def test_amx_bf16_reads_the_isa_cap_from_the_environment(monkeypatch):
    from gpukit.hardware.cpu import amx_bf16_usable

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not amx_bf16_usable(X86)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX10_1_512_AMX_FP16")
    assert amx_bf16_usable(X86)
