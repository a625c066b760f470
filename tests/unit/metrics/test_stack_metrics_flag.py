"""`qm up --metrics-port`: on by default, 0 turns it off."""

from __future__ import annotations

import argparse

from quartermaster_stack.cli import METRICS_PORT, register, settings_from


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["up", *argv])


def test_metrics_are_served_on_the_default_port_unless_turned_off() -> None:
    assert settings_from(parsed()).metrics_port == METRICS_PORT
    assert settings_from(parsed("--metrics-port", "9300")).metrics_port == 9300
    assert settings_from(parsed("--metrics-port", "0")).metrics_port is None
