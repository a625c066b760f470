"""`bench/fuzz_admission.py` in its smoke size, so the fuzz script cannot rot.

About 300 hostile requests over every qm.v1 RPC, as every kind of caller, on a
secured stack the script starts itself: no crash, no INTERNAL or UNKNOWN, no
accepted call the caller had no right to, and no state change by the phases
whose calls must all be refused.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "fuzz_admission.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_admission", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.e2e
def test_three_hundred_hostile_requests_find_nothing() -> None:
    fuzz = load_script()
    options = fuzz.Options(requests=300, seed=7, concurrency=16)
    report = fuzz.run(options)
    fuzz.print_report(report, options)  # shown when the test fails
    assert report.sent >= 300
    assert [f.line() for f in report.crashes] == []
    assert [f.line() for f in report.internal] == []
    assert [f.line() for f in report.violations] == []
    assert len(report.state_checks) == 2  # both refused-only phases were checked
    # Every RPC of every qm.v1 service was called, and every kind of caller called.
    assert set(report.by_method) == {rpc.name for rpc in fuzz.every_rpc()}
    assert all(sum(codes.values()) > 0 for codes in report.by_role.values())
