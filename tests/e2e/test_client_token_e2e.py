"""client_token idempotency through gRPC."""

from __future__ import annotations

import grpc
import pytest
from conftest import StackFactory, client_for
from scenario import setup_queue, shell

from quartermaster.client import QuartermasterError


def test_same_token_same_request_returns_the_first_job(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=1)
    c = client_for(stack)
    queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    first = queue.submit(
        shell("exit 0"), job_name="once", quota_share_name="A", client_token="tok-1"
    )
    again = queue.submit(
        shell("exit 0"), job_name="once", quota_share_name="A", client_token="tok-1"
    )
    assert again.job_id == first.job_id
    with pytest.raises(QuartermasterError) as err:
        queue.submit(shell("exit 1"), job_name="once", quota_share_name="A", client_token="tok-1")
    assert err.value.code in (grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.INVALID_ARGUMENT)
    assert "client_token" in err.value.details
    assert [j.job_id for j in c.list_jobs("q")] == [first.job_id]
