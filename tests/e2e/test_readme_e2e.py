"""The README runs: its ```sh and ```python blocks, in order, against a `qm up` this test
starts (blocks marked ```sh no-run are skipped: bootstrap, `qm up` itself).

Each block runs as a reader would paste it into a shell of an activated venv, in a
fresh directory whose `.venv` is this repository's (so `.venv/bin/qm` works) and where
`qm up` keeps `.qm-data` (so the credentials are found as the README says).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from qm_up import qm_up

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUNNABLE = ("sh", "python")
FENCE = re.compile(r"^```(?P<info>[^`]*)$")

pytestmark = pytest.mark.e2e


def blocks(text: str) -> list[tuple[str, str, int]]:
    """(info string, code, line) of every fenced block."""
    out: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        out.append((opened["info"].strip(), "\n".join(body) + "\n", start + 1))
        i += 1
    return out


def runnable(text: str) -> list[tuple[str, str, int]]:
    return [(info, code, line) for info, code, line in blocks(text) if info in RUNNABLE]


def test_the_extractor_tells_runnable_blocks_from_the_rest() -> None:
    text = "```sh\necho a\n```\n```sh no-run\nqm up\n```\n```console\n$ x\n```\n```\nart\n```\n"
    text += "```python\nprint(1)\n```\n"
    assert [(i, c) for i, c, _ in runnable(text)] == [("sh", "echo a\n"), ("python", "print(1)\n")]


def test_the_readme_blocks_run_against_qm_up(tmp_path: Path) -> None:
    found = runnable(README.read_text())
    assert [info for info, _, _ in found].count("python") >= 1 and len(found) >= 3
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "docs").symlink_to(ROOT / "docs")  # the examples it runs, as in a checkout
    outputs: list[str] = []
    with qm_up(tmp_path / ".qm-data", "--nodes", "3", cwd=tmp_path) as stack:
        env = {k: v for k, v in stack.env.items() if k != "QM_CREDENTIALS_DIR"}
        for info, code, line in found:
            argv = (
                ["bash", "-euo", "pipefail", "-c", code]
                if info == "sh"
                else [sys.executable, "-c", code]
            )
            run = subprocess.run(
                argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            outputs.append(run.stdout + run.stderr)
            print(f"--- README.md line {line} ```{info}:\n{outputs[-1]}")
            assert run.returncode == 0, (
                f"README.md line {line} (```{info}) exited {run.returncode}:\n{code}\n"
                f"--- output ---\n{outputs[-1]}"
            )
    everything = "\n".join(outputs)
    assert "hello from a job" in everything  # qm job logs showed the job's output
    assert "model: 100" in everything  # the S3 channel, the hyperparameter, model.tar.gz in S3
    # The preempted counter started at 0, then resumed from its checkpoint in S3, not from 0.
    starts = [int(n) for n in re.findall(r"^starting at step (\d+)$", everything, re.M)]
    assert starts[:1] == [0] and len(starts) == 2 and starts[1] > 0, starts
    assert "done at step 20" in everything
    # boto3 and the SageMaker SDK, configured by `eval "$(qm aws-env)"` only
    assert "quota management example: done" in everything
    assert "warm pool example: done" in everything
    python_output = outputs[[info for info, _, _ in found].index("python")]
    assert "SUCCEEDED" in python_output, python_output  # the Python snippet's job
