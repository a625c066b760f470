"""`qm top`: a live table of every share's use, limit, borrowing, lending and jobs.

Each frame asks admission (GetJobQueueSnapshot for use and limits, ListServiceJobs
for running and waiting jobs, ListQuotaShares and DescribeServiceEnvironments for
what is lent), so it shows exactly what the caller may read: a member, who may not
read the configuration, names the queue with `--queue` and sees LENT as `-`; the
jobs of shares it is not a member of are not counted. `--once` prints one frame.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
import msgspec

RICH_EXTRA = "qm top needs the console extra: pip install 'quartermaster[console]'"
LENDERS = frozenset({"LEND", "LEND_AND_BORROW"})
RUNNING = ("SCHEDULED", "STARTING", "RUNNING")
HEADERS = (
    "QUEUE",
    "SHARE",
    "UNIT",
    "USE",
    "LIMIT",
    "BORROWED",
    "LENT",
    "RUNNING",
    "WAITING",
    "TOP WAIT REASON",
)
NUMBERS = frozenset(HEADERS[3:9])


class ShareRow(msgspec.Struct, frozen=True):
    """One share's hold on one unit, and its jobs (all units), in one frame."""

    queue: str
    share: str
    unit: str
    in_use: int
    limit: int
    borrowed: int
    lent: int | None  # None: the caller may not read what it needs (strategies, capacity)
    running: int
    waiting: int
    top_reason: str  # the commonest wait reason of its RUNNABLE jobs, with their count


def lent_units(
    holds: dict[str, tuple[int, int]], strategies: dict[str, str], capacity: int
) -> dict[str, int]:
    """Units of each lender's own limit that borrowers hold now, for one queue and unit.

    Borrowers take unassigned capacity (the environment's beyond every own limit)
    first, then lenders' idle units; the pass does not say whose idle unit a borrower
    took, so the rest is charged to LEND and LEND_AND_BORROW shares in name order.
    `holds`: share -> (in use, own limit). RESERVE shares never lend.
    """
    borrowed = sum(max(0, use - limit) for use, limit in holds.values())
    unassigned = max(0, capacity - sum(limit for _, limit in holds.values()))
    left = max(0, borrowed - unassigned)
    lent = {}
    for share in sorted(holds):
        use, limit = holds[share]
        idle = max(0, limit - use) if strategies.get(share) in LENDERS else 0
        lent[share] = min(idle, left)
        left -= lent[share]
    return lent


def top_reason(reasons: Iterable[str]) -> str:
    """`SHARE_AT_LIMIT x3`: the commonest reason; ties go to the one seen first (the head)."""
    counts = Counter(reasons)
    if not counts:
        return "-"
    reason, count = counts.most_common(1)[0]
    return reason if count == 1 else f"{reason} x{count}"


def _reason(job: Any) -> str:
    from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

    if job.HasField("wait_reason") and job.wait_reason.code:
        return str(pb.WaitReasonCode.Name(job.wait_reason.code)).removeprefix("WAIT_REASON_CODE_")
    return str(job.status_reason).split(" - ")[0] or "-"


def _readable(call: Any, *args: Any) -> Any:
    """The call's answer, or None where the caller is not allowed to make it."""
    from quartermaster.client import QuartermasterError

    try:
        return call(*args)
    except QuartermasterError as err:
        if err.code is grpc.StatusCode.PERMISSION_DENIED:
            return None
        raise


def _capacity(client: Any, queue: str) -> dict[str, int] | None:
    """The queue's environment's usable units per unit (None: not readable)."""
    queues = _readable(client.describe_job_queues, [queue])
    if not queues:
        return None
    envs = [o.service_environment for o in queues[0].service_environment_order]
    found = _readable(client.describe_service_environments, envs)
    if found is None:
        return None
    capacity: dict[str, int] = Counter()
    for env in found:
        for cap in env.capacity:
            capacity[cap.capacity_unit] += cap.usable_capacity
    return dict(capacity)


def queue_rows(client: Any, queue: str) -> list[ShareRow]:
    """One frame of one queue."""
    from quartermaster.cli.tables import enum_name

    snapshot = client.queue_snapshot(queue, 1)
    waiting = client.list_jobs(queue, "RUNNABLE")
    running = [j for status in RUNNING for j in client.list_jobs(queue, status)]
    shares = _readable(client.list_quota_shares, queue)
    capacity = _capacity(client, queue) if shares is not None else None
    strategies = {
        s.quota_share_name: enum_name(s.resource_sharing_configuration, "strategy")
        for s in shares or ()
    }
    holds: dict[str, dict[str, tuple[int, int]]] = {}
    for s in snapshot.quota_shares:
        for u in s.capacity_usage:
            holds.setdefault(u.capacity_unit, {})[s.quota_share_name] = (u.quantity, u.max_capacity)
    lent = {
        unit: lent_units(by_share, strategies, capacity.get(unit, 0))
        for unit, by_share in holds.items()
        if capacity is not None
    }
    rows = []
    for s in sorted(snapshot.quota_shares, key=lambda s: s.quota_share_name):
        name = s.quota_share_name
        mine = [j for j in waiting if j.quota_share_name == name]
        for u in sorted(s.capacity_usage, key=lambda u: u.capacity_unit):
            rows.append(
                ShareRow(
                    queue,
                    name,
                    u.capacity_unit,
                    u.quantity,
                    u.max_capacity,
                    u.borrowed,
                    lent[u.capacity_unit][name] if u.capacity_unit in lent else None,
                    sum(1 for j in running if j.quota_share_name == name),
                    len(mine),
                    top_reason(_reason(j) for j in mine),
                )
            )
    return rows


def frame(client: Any, queues: Sequence[str]) -> list[ShareRow]:
    if not queues:
        found = _readable(client.describe_job_queues)
        if found is None:
            from quartermaster.audit.errors import ConfigError

            raise ConfigError("listing queues is not permitted to this caller: name --queue")
        queues = sorted(q.job_queue_name for q in found)
    return [row for queue in queues for row in queue_rows(client, queue)]


def table(rows: Sequence[ShareRow], title: str) -> Any:
    from rich.table import Table

    out = Table(title=title, title_justify="left", header_style="bold")
    for header in HEADERS:
        out.add_column(header, justify="right" if header in NUMBERS else "left")
    for r in rows:
        over = "bold yellow" if r.borrowed else ""
        out.add_row(
            r.queue,
            r.share,
            r.unit,
            f"[{over}]{r.in_use}[/]" if over else str(r.in_use),
            str(r.limit),
            str(r.borrowed),
            "-" if r.lent is None else str(r.lent),
            str(r.running),
            str(r.waiting),
            r.top_reason,
        )
    return out


def top_command(a: argparse.Namespace) -> int:
    try:
        from rich.console import Console
        from rich.live import Live
    except ModuleNotFoundError:
        print(f"qm: error: {RICH_EXTRA}", file=sys.stderr)
        return 2
    from quartermaster.cli.bus import admission_of
    from quartermaster.client import Quartermaster, QuartermasterError

    address, credentials = admission_of(a)
    console = Console()
    if not console.is_terminal:  # piped or captured: whole rows, not 80 columns
        console = Console(width=200)

    def title() -> str:
        return f"qm top  {address}  {time.strftime('%H:%M:%S')}"

    with Quartermaster(address, credentials_dir=credentials, insecure=a.insecure or None) as client:
        try:
            if a.once:
                console.print(table(frame(client, a.queue), title()))
                return 0
            with Live(table(frame(client, a.queue), title()), console=console) as live:
                while True:
                    time.sleep(a.interval)
                    live.update(table(frame(client, a.queue), title()))
        except QuartermasterError as err:
            print(f"qm: error: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0


def register(groups: Any) -> None:
    """Add `top` to `qm`."""
    from quartermaster.cli.audit import _guarded
    from quartermaster.cli.bus import add_data_dir

    p: argparse.ArgumentParser = groups.add_parser(
        "top", help="a live table of shares' use, borrowing and waiting jobs"
    )
    p.set_defaults(run=_guarded(top_command))
    p.add_argument("--queue", action="append", default=[], help="this queue (repeat; default all)")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between frames")
    p.add_argument("--once", action="store_true", help="print one frame and exit (scripts, tests)")
    add_data_dir(p, "where `qm up` wrote stack.json and credentials/ (admission's address)")
