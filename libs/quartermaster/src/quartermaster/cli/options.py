"""The parser pieces every `qm` command shares: help with defaults, one-line usage errors,
case-insensitive enum choices and `--output table|json`.

JSON is what the AWS Batch operation of the same name returns (`client.shapes`), so a
script written for `aws batch describe-service-job` reads `qm job describe -o json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from google.protobuf.message import Message

from quartermaster.client.shapes import aws_output, listing

USAGE_ERROR = 2  # bad input (argparse's own code)
CALL_ERROR = 1  # the server refused or failed the call

# The output member holding a list command's items, by (group, command): AWS's name
# where an AWS operation lists them, else the qm.v1 response's.
LISTED_AS = {
    ("env", "list"): "serviceEnvironments",  # DescribeServiceEnvironments
    ("policy", "list"): "schedulingPolicies",  # DescribeSchedulingPolicies
    ("queue", "list"): "jobQueues",  # DescribeJobQueues
    ("share", "list"): "quotaShares",  # ListQuotaShares
    ("job", "list"): "jobSummaryList",  # ListServiceJobs
    ("pools", "list"): "warmPoolSummaries",  # qm.v1 ListWarmPools
    ("nodes", "list"): "nodes",  # qm.v1 ListNodes
}


class UsageError(Exception):
    """Input the parser accepted but a handler cannot use (e.g. `--capacity gpu`)."""


class DefaultsFormatter(argparse.RawDescriptionHelpFormatter):
    """Adds `(default: X)` to a flag's help where there is a default worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "(default" in text
            or not action.option_strings
            or action.required
            or default is None
            or default is False
            or default == ""
            or default == argparse.SUPPRESS
            or isinstance(action, argparse._HelpAction)
        ):
            return text
        return f"{text} (default: %(default)s)"


class QmParser(argparse.ArgumentParser):
    """Shows each flag's default in `--help`; a usage error is one line, never a traceback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see `{self.prog} --help`)", USAGE_ERROR)


def fail(message: str, code: int) -> NoReturn:
    print(f"qm: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def choice(values: Iterable[str], *, lower: bool = False) -> dict[str, Any]:
    """`add_argument` keywords for an enum flag: any case in, canonical case out."""
    canonical = tuple(values)

    def convert(text: str) -> str:
        return text.lower() if lower else text.upper()

    convert.__name__ = "value"  # argparse names the type in "invalid value: 'x'"
    return {"type": convert, "choices": canonical, "metavar": "{" + ",".join(canonical) + "}"}


def enum_values(enum: Any) -> tuple[str, ...]:
    """`JOB_STATUS_RUNNING` ... -> ("RUNNING", ...): a proto enum's names, prefix off."""
    names = [value.name for value in enum.DESCRIPTOR.values]
    prefix = names[0].removesuffix("UNSPECIFIED")
    return tuple(n.removeprefix(prefix) for n in names[1:])


def capacity(text: str) -> tuple[str, int]:
    """`ml.g5.xlarge=4` -> (unit, count); argparse turns a ValueError into a usage error."""
    unit, sep, count = text.partition("=")
    if not sep or not unit or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not UNIT=N (e.g. ml.g5.xlarge=4)")
    return unit, int(count)


def capacity_of(values: Sequence[tuple[str, int]]) -> dict[str, int]:
    return dict(values)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def principal_arguments(p: argparse.ArgumentParser, credential: str) -> None:
    """--subject, --role and --share of a credential bound to a principal (a token, a key)."""
    p.add_argument(
        "--subject", required=True, help=f"who the {credential} names (recorded on writes)"
    )
    p.add_argument(
        "--role",
        required=True,
        type=str.lower,
        choices=("admin", "member", "auditor"),
        help="what it may do",
    )
    p.add_argument(
        "--share",
        action="append",
        default=[],
        metavar="QUEUE/SHARE",
        help="a quota share a member may use (repeat for several)",
    )


def add_output(p: argparse.ArgumentParser, default: str = "table") -> None:
    p.add_argument(
        "--output",
        "-o",
        default=default,
        help="table for people, json for scripts",
        **choice(("table", "json"), lower=True),
    )


def show(message: Message) -> None:
    """Print an answer as JSON in its AWS shape."""
    print(json.dumps(aws_output(message), indent=2))


def fields(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A message's dict as (dotted.field, value) rows: nested fields and list items flat."""
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in fields(v, f"{prefix}{k}.")]
    if isinstance(value, list) and value:
        return [row for i, v in enumerate(value) for row in fields(v, f"{prefix}{i}.")]
    return [
        (prefix.removesuffix("."), json.dumps(value) if isinstance(value, list) else str(value))
    ]


def show_one(args: argparse.Namespace, message: Message) -> None:
    """A describe command's result: JSON, or one FIELD VALUE row per (nested) field."""
    if getattr(args, "output", "json") == "json":
        show(message)
        return
    rows = fields(aws_output(message))
    width = max((len(k) for k, _ in rows), default=0)
    print("\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))


def emit(
    args: argparse.Namespace,
    items: Sequence[Message],
    table: Callable[[Sequence[Message]], str],
) -> None:
    """Print a list command's items as the table, or as JSON under their output member."""
    if getattr(args, "output", "table") == "json":
        key = LISTED_AS[(args.group, args.command)]
        print(json.dumps(listing(key, items), indent=2))
    else:
        print(table(items))
