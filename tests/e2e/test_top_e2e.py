"""`qm top --once` on a running stack in the seed scenario's borrowing moment.

QS1 (LEND_AND_BORROW) runs two jobs on its own unit and QS2's idle one, its third
waits because QS3 (RESERVE) holds its unit back. An admin sees the borrowing, who
lends it, and why the third job waits; a member of QS2 sees what its permissions
allow: no configuration (so no LENT), and no QS1 jobs.
"""

from __future__ import annotations

import time

import pytest
from conftest import client_for
from scenario import LONG, setup_queue, shell, status, until

from quartermaster.auth import Role, ShareRef
from quartermaster.auth.local import LocalCredentials
from quartermaster.cli.main import main as qm

COLUMNS = ("QUEUE", "SHARE", "UNIT", "USE", "LIMIT", "BORROWED", "LENT", "RUNNING", "WAITING")


def rows(out: str) -> dict[str, dict[str, str]]:
    """The table's rows by share: {column: cell}, from rich's box-drawn lines."""
    found = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == len(COLUMNS) + 1 and cells[0] == "q":
            found[cells[1]] = dict(zip((*COLUMNS, "REASON"), cells, strict=True))
    return found


def test_top_once_shows_use_borrowing_lending_and_why_jobs_wait(  # type: ignore[no-untyped-def]
    make_stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = make_stack(nodes=3)
    with client_for(stack) as c:
        queue = setup_queue(
            c,
            3,
            [
                ("QS1", 1, "LEND_AND_BORROW", 200, True),
                ("QS2", 1, "LEND", None, False),
                ("QS3", 1, "RESERVE", None, False),
            ],
        )
        high = queue.submit(shell(LONG), job_name="high", quota_share_name="QS1", priority=3)
        med = queue.submit(shell(LONG), job_name="med", quota_share_name="QS1", priority=2)
        low = queue.submit(shell(LONG), job_name="low", quota_share_name="QS1", priority=1)
        until(
            "high and med run", lambda: status(c, high.job_id) == status(c, med.job_id) == "RUNNING"
        )
        until("low has a reason", lambda: bool(c.describe_job(low.job_id).status_reason))

    a = ["--address", stack.address, "--credentials", str(stack.credentials_dir)]
    capsys.readouterr()
    assert qm([*a, "top", "--once"]) == 0
    table = rows(capsys.readouterr().out)
    assert set(table) == {"QS1", "QS2", "QS3"}
    qs1, qs2, qs3 = table["QS1"], table["QS2"], table["QS3"]
    assert (qs1["USE"], qs1["LIMIT"], qs1["BORROWED"], qs1["LENT"]) == ("2", "1", "1", "0")
    assert (qs1["RUNNING"], qs1["WAITING"]) == ("2", "1")
    assert qs1["REASON"] == "RESERVE_HELD_BACK"
    assert (qs2["USE"], qs2["BORROWED"], qs2["LENT"], qs2["RUNNING"]) == ("0", "0", "1", "0")
    assert (qs3["USE"], qs3["LENT"], qs3["WAITING"], qs3["REASON"]) == ("0", "0", "0", "-")

    assert stack.credentials_dir is not None
    creds = LocalCredentials(stack.credentials_dir)
    member = creds.issue("team-2", [Role.MEMBER], [ShareRef.parse("q/QS2")], issued_at=time.time())
    monkeypatch.setenv("QM_TOKEN", member)
    assert qm([*a, "top", "--once"]) == 2
    assert "name --queue" in capsys.readouterr().err
    assert qm([*a, "top", "--once", "--queue", "q"]) == 0
    seen = rows(capsys.readouterr().out)
    assert seen["QS2"]["LENT"] == "-" and seen["QS1"]["RUNNING"] == "0"
    assert seen["QS1"]["WAITING"] == "0" and seen["QS1"]["USE"] == "2"
