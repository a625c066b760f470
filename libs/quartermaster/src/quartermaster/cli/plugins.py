"""Commands that other distributions add to `qm` (entry point group `quartermaster.cli`).

The library never imports the programs built on it: `qm up` and `qm demo` come
from the `quartermaster-stack` distribution, which registers them here. Each
entry point is a `register(groups)` function that adds sub-parsers and sets
`run=<callable(args) -> int>` as their default. Where the stack is not
installed, `qm up` says which distribution to install instead of failing on
an import; where it is installed but one of its dependencies is missing or broken,
`qm up` names that module and its `pip install` (and every other command still
works: a plugin's import error never reaches them).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from typing import Any

from quartermaster.cli.dependencies import missing_dependency

GROUP = "quartermaster.cli"
STACK_COMMANDS = {
    "up": "run the whole stack on this machine",
    "demo": "bring the stack up and play the seed scenario",
    "token": "bearer tokens of a `qm up` stack",
}


def register_all(groups: Any) -> None:
    broken: ImportError | None = None
    for entry in entry_points(group=GROUP):
        try:
            entry.load()(groups)
        except ImportError as err:  # said by its commands when they are run
            broken = err
    for name, help_ in STACK_COMMANDS.items():
        if name not in groups.choices:
            state = "not installed" if broken is None else "cannot start"
            # Any arguments are taken (none is an option here): the command only explains.
            p: argparse.ArgumentParser = groups.add_parser(
                name, help=f"{help_} ({state})", prefix_chars="\0", add_help=False
            )
            p.add_argument("ignored", nargs="*", help=argparse.SUPPRESS)
            p.set_defaults(run=_not_installed(name) if broken is None else _broken(name, broken))


def _not_installed(name: str) -> Any:
    def run(_: argparse.Namespace) -> int:
        print(
            f"qm: error: `qm {name}` needs the quartermaster-stack distribution and the services "
            "(pip install quartermaster-stack, or run scripts/bootstrap.sh)",
            file=sys.stderr,
        )
        return 2

    return run


def _broken(name: str, err: ImportError) -> Any:
    def run(_: argparse.Namespace) -> int:
        print(f"qm: error: {missing_dependency(f'qm {name}', err)}", file=sys.stderr)
        return 1

    return run
