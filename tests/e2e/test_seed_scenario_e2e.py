"""The seed scenario through gRPC, with real node agents running real processes."""

from __future__ import annotations

from conftest import StackFactory, client_for
from scenario import play_seed_scenario


def test_seed_scenario_through_grpc(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=3)
    play_seed_scenario(client_for(stack))
