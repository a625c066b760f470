"""`qm usage` on the seed scenario's recorded log: a valid PNG that shows what happened.

`seed-scenario-stack.jsonl` is the seed scenario played on a live stack and exported
(tests/fixtures/logs/record_stack_seed.py): QS1 borrows QS2's unit, QS2 reclaims it,
then an in-share preemption inside QS1. The picture is checked by its pixels, too:
the borrowed shading and the preemption marks are there, and absent where they are not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from logs import FIXTURES

from quartermaster.audit.envelope import admit
from quartermaster.audit.logfile import read_log
from quartermaster.audit.replay import usage
from quartermaster.audit.usage import usage_series
from quartermaster.cli.main import main
from quartermaster.core import State, fold

pytest.importorskip("matplotlib", reason="the plot extra (installed by dev) draws the picture")
import numpy  # matplotlib's dependencies, like Pillow
from PIL import Image

STACK_SEED = FIXTURES / "seed-scenario-stack.jsonl"
UNIT = "ml.g5.xlarge"
BORROWED = (255, 197, 147)  # tab:orange at alpha 0.45 on white
RECLAIM = (214, 39, 40)  # tab:red
IN_SHARE = (148, 103, 189)  # tab:purple


def qm(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def pixels_near(path: Path, rgb: tuple[int, int, int], within: int = 12) -> int:
    with Image.open(path) as image:
        data = numpy.asarray(image.convert("RGB"), dtype=numpy.int16)
    return int((numpy.abs(data - numpy.array(rgb)) <= within).all(axis=2).sum())


def test_the_seed_scenarios_series_shows_its_borrowing_and_both_preemptions() -> None:
    series = usage_series(read_log(STACK_SEED))
    assert series.share_units() == [("q", s, UNIT) for s in ("QS1", "QS2", "QS3")]
    assert series.peak_borrowed(("q", "QS1", UNIT)) == 1
    assert max(p.in_use for p in series.of(("q", "QS3", UNIT))) == 0  # RESERVE: held back
    marks = [(m.share, m.job_name, m.rule, m.lender_share) for m in series.preemptions]
    assert marks == [("QS1", "med", "RECLAIM", "QS2"), ("QS1", "high", "IN_SHARE", "")]
    qs1 = series.of(("q", "QS1", UNIT))
    borrows = next(p.at for p in qs1 if p.borrowed)
    borrowing_ends = next(p.at for p in qs1 if p.at > borrows and not p.borrowed)
    assert borrows < series.preemptions[0].at
    assert series.preemptions[0].at < borrowing_ends  # the reclaim ends the borrowing


def test_qm_usage_draws_a_png_of_the_seed_scenario(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "usage.png"
    status, said, _ = qm(capsys, "usage", "--from-file", str(STACK_SEED), "--out", str(out))
    assert status == 0
    assert "3 shares" in said and "2 preemptions" in said and "QS1/ml.g5.xlarge=1" in said
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(out) as image:
        image.verify()
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width >= 800 and image.height >= 500
    assert pixels_near(out, BORROWED) > 500
    assert pixels_near(out, RECLAIM) > 20 and pixels_near(out, IN_SHARE) > 20


def test_a_window_without_borrowing_or_preemptions_draws_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    series = usage_series(read_log(STACK_SEED))
    after = series.preemptions[-1].at + 0.001
    out = tmp_path / "late.png"
    status, said, _ = qm(
        capsys, "usage", "--from-file", str(STACK_SEED), "--since", f"@{after}", "--out", str(out)
    )
    assert status == 0 and "0 preemptions" in said
    assert pixels_near(out, BORROWED) == 0
    assert pixels_near(out, RECLAIM) == 0 and pixels_near(out, IN_SHARE) == 0


def test_csv_prints_the_series(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = qm(capsys, "usage", "--from-file", str(STACK_SEED), "--format", "csv")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("time,epoch,seq,queue,share")
    assert any(line.endswith(",q,QS1,ml.g5.xlarge,2,1,1") for line in lines)


def test_a_picture_needs_out_and_bad_times_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = qm(capsys, "usage", "--from-file", str(STACK_SEED))
    assert status == 2 and "--out is required" in err
    status, _, err = qm(
        capsys, "usage", "--from-file", str(STACK_SEED), "--since", "soon", "--out", "x.png"
    )
    assert status == 2 and "--since: a duration" in err


def test_without_matplotlib_it_says_which_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "usage.png"
    status, _, err = qm(capsys, "usage", "--from-file", str(STACK_SEED), "--out", str(out))
    assert status == 2 and "quartermaster[plot]" in err and "--format csv" in err
    assert not out.exists()


def test_the_series_matches_the_folded_state_after_every_message_of_a_busy_log() -> None:
    """The series skips messages that change no share; it must never skip a change."""
    log = list(read_log(FIXTURES / "busy-stack.jsonl"))
    series = usage_series(log)
    latest: dict[tuple[str, str, str], tuple[int, int]] = {}
    points = iter(series.points)
    pending = next(points, None)
    state = State()
    for envelope in log:
        for event in admit(envelope)[0]:
            fold(state, event)
        while pending is not None and pending.seq <= envelope.seq:
            latest[(pending.queue, pending.share, pending.unit)] = (pending.in_use, pending.limit)
            pending = next(points, None)
        folded = {(u.queue, u.share, u.unit): (u.in_use, u.limit) for u in usage(state)}
        assert latest == folded, f"after seq {envelope.seq}"
    assert len(series.points) > 50 and len(series.preemptions) == 6
