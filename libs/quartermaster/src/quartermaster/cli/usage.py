"""`qm usage`: quota use per share over time, from the log, as a PNG or CSV.

It reads the same sources as the auditor's commands (`--from-file` an export,
else the live stream through the read-only auditor user) and folds them with
`quartermaster.audit.usage`; only the drawing needs the `plot` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from quartermaster.audit.envelope import Envelope
from quartermaster.audit.errors import ConfigError
from quartermaster.cli import audit


def usage_command(a: argparse.Namespace) -> int:
    from quartermaster.audit.usage import parse_bound, to_csv, usage_series

    if a.format == "png" and a.out is None:
        raise ConfigError("--out is required for a picture (or use --format csv)")
    since = parse_bound(a.since, "--since") if a.since is not None else None
    until = parse_bound(a.until, "--until") if a.until is not None else None
    envelopes: list[Envelope] = []
    audit._each(a, envelopes.append)
    series = usage_series(envelopes, since, until, a.queue)
    if a.format == "csv":
        lines = "\n".join(to_csv(series)) + "\n"
        if a.out is None:
            sys.stdout.write(lines)
        else:
            a.out.write_text(lines)
        return 0
    from quartermaster.audit.usage_png import PLOT_EXTRA, render_png

    try:
        render_png(series, a.out, a.title)
    except ModuleNotFoundError as err:
        if err.name is None or not err.name.startswith("matplotlib"):
            raise
        print(f"qm: error: {PLOT_EXTRA}", file=sys.stderr)
        return 2
    borrowed = {f"{k[1]}/{k[2]}": series.peak_borrowed(k) for k in series.share_units()}
    print(
        f"wrote {a.out}: {len(series.share_units())} shares, {len(series.points)} points, "
        f"{len(series.preemptions)} preemptions, peak borrowed "
        + (", ".join(f"{k}={v}" for k, v in borrowed.items()) or "-")
    )
    return 0


def register(groups: Any) -> None:
    """Add `usage` to `qm`."""
    p: argparse.ArgumentParser = groups.add_parser(
        "usage", help="quota use per share over time, from the log (PNG or CSV)"
    )
    p.set_defaults(run=audit._guarded(usage_command))
    audit._source_flags(p)
    p.add_argument(
        "--since",
        default=None,
        help="window start: 1h, 30m, 90s before the log's last event, @EPOCH or ISO 8601 "
        "(default: the log's first event)",
    )
    p.add_argument("--until", default=None, help="window end, same forms (default: the log's end)")
    p.add_argument("--queue", default=None, help="only this queue's shares")
    p.add_argument("--out", type=Path, default=None, help="where to write (csv: default stdout)")
    p.add_argument("--format", choices=("png", "csv"), default="png")
    p.add_argument("--title", default="Quota use per share", help="the picture's title")
