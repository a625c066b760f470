"""A warm-pool chain end to end: Available -> Reused/InUse -> Available -> Terminated."""

from __future__ import annotations

from conftest import StackFactory, client_for
from scenario import setup_queue, shell, status, until

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

CACHE = '"$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"'


def pool_status(c, job_id: str) -> int:  # type: ignore[no-untyped-def]
    return c.describe_job(job_id).warm_pool_status.status


def test_warm_pool_chain(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=2)
    c = client_for(stack)
    queue = setup_queue(c, 2, [("A", 2, "LEND_AND_BORROW", None, False)])

    a = queue.submit(
        shell(f"echo from-a > {CACHE}/marker", keep_alive_seconds=60),
        job_name="a",
        quota_share_name="A",
    )
    until("a succeeded", lambda: status(c, a.job_id) == "SUCCEEDED")
    until("a's pool Available", lambda: pool_status(c, a.job_id) == pb.WARM_POOL_STATUS_AVAILABLE)
    a_host = c.describe_job(a.job_id).attempts[-1].host_ids[0]
    cache_dir = stack.stack.node_data_dir(a_host) / "warmpool-cache" / a.job_id
    assert (cache_dir / "marker").read_text() == "from-a\n"
    assert [p.job_id for p in c.list_warm_pools("AVAILABLE")] == [a.job_id]

    # A job with another RoleArn does not match: it runs cold on the other host.
    other = queue.submit(
        shell("exit 0", role_arn="arn:aws:iam::1:role/other"),
        job_name="other",
        quota_share_name="A",
    )
    until("other succeeded", lambda: status(c, other.job_id) == "SUCCEEDED")
    assert c.describe_job(other.job_id).attempts[-1].host_ids[0] != a_host
    assert pool_status(c, a.job_id) == pb.WARM_POOL_STATUS_AVAILABLE

    # A matching job reuses the pool and finds the cache left by a.
    b = queue.submit(
        shell(f"grep -q from-a {CACHE}/marker || exit 3", keep_alive_seconds=2),
        job_name="b",
        quota_share_name="A",
    )
    until("b succeeded", lambda: status(c, b.job_id) == "SUCCEEDED")
    a_pool = c.describe_job(a.job_id).warm_pool_status
    assert a_pool.status == pb.WARM_POOL_STATUS_REUSED
    assert a_pool.reused_by_job == b.job_id
    assert c.describe_job(b.job_id).attempts[-1].host_ids[0] == a_host

    # b's own pool: Available for its 2 s keep-alive, then Terminated (expired), billed.
    until(
        "b's pool expired",
        lambda: pool_status(c, b.job_id) == pb.WARM_POOL_STATUS_TERMINATED,
        timeout=30,
    )
    billed = c.describe_job(b.job_id).warm_pool_status.resource_retained_billable_time_in_seconds
    assert 1 <= billed <= 5
    until("cache dir deleted", lambda: not cache_dir.exists(), timeout=15)
