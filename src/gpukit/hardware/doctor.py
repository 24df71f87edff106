"""`gpukit doctor` as a library: run every registered check over one :class:`Facts`, never raising.

A check that itself crashes becomes a FAIL finding naming the crash, so one bug cannot hide the other findings.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpukit.hardware.checks import CHECKS
from gpukit.hardware.facts import Facts, Finding, gather_facts

__all__ = ["SCHEMA_VERSION", "DoctorReport", "Facts", "Finding", "doctor", "run_checks"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> bool:
        return any(x.level == "FAIL" for x in self.findings)

    def counts(self) -> dict[str, int]:
        return {lvl: sum(1 for x in self.findings if x.level == lvl) for lvl in ("PASS", "WARN", "FAIL", "SKIP")}

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": not self.failed,
            "counts": self.counts(),
            "findings": [x.to_dict() for x in self.findings],
        }


def run_checks(facts: Facts) -> DoctorReport:
    """Every check in registry order over ``facts``."""
    findings: list[Finding] = []
    for name, check in CHECKS:
        try:
            findings.extend(check(facts))
        except Exception as exc:  # a bug in one check must not hide the others
            findings.append(
                Finding(
                    name,
                    "FAIL",
                    f"the check itself crashed: {type(exc).__name__}: {exc}",
                    "please report this as a gpukit bug",
                )
            )
    return DoctorReport(tuple(findings))


def doctor(probe_timeout_s: float = 60.0) -> DoctorReport:
    """Look at this machine and run every check."""
    return run_checks(gather_facts(probe_timeout_s=probe_timeout_s))
