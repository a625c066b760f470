"""Commands that other distributions add to `qm` (entry point group `quartermaster.cli`).

The library never imports the programs built on it: `qm up` and `qm demo` come
from the `quartermaster-stack` distribution, which registers them here. Each
entry point is a `register(groups)` function that adds sub-parsers and sets
`run=<callable(args) -> int>` as their default. Where the stack is not
installed, `qm up` says which distribution to install instead of failing on
an import.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from typing import Any

GROUP = "quartermaster.cli"
STACK_COMMANDS = {
    "up": "run the whole stack on this machine",
    "demo": "bring the stack up and play the seed scenario",
}


def register_all(groups: Any) -> None:
    for entry in entry_points(group=GROUP):
        entry.load()(groups)
    for name, help_ in STACK_COMMANDS.items():
        if name not in groups.choices:
            p: argparse.ArgumentParser = groups.add_parser(name, help=f"{help_} (not installed)")
            p.set_defaults(run=_not_installed(name))


def _not_installed(name: str) -> Any:
    def run(_: argparse.Namespace) -> int:
        print(
            f"qm: error: `qm {name}` needs the quartermaster-stack distribution and the services "
            "(pip install quartermaster-stack, or run scripts/bootstrap.sh)",
            file=sys.stderr,
        )
        return 2

    return run
