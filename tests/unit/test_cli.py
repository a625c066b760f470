"""The `qm` command line without a server: parsing, help, one-line errors and exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from quartermaster.cli import jobs
from quartermaster.cli.main import main, parser, split_command
from quartermaster.cli.options import UsageError

OURS = ("env", "policy", "queue", "share", "job", "pools", "nodes", "tags")
READS = {
    ("env", "list"),
    ("policy", "list"),
    ("tags", "list"),
    ("queue", "list"),
    ("queue", "snapshot"),
    ("share", "list"),
    ("share", "describe"),
    ("job", "describe"),
    ("job", "list"),
    ("job", "submit-many"),
    ("pools", "list"),
    ("nodes", "list"),
}
OFFLINE = ["--insecure", "--address", "127.0.0.1:1"]  # nothing listens there


def commands() -> dict[tuple[str, str], argparse.ArgumentParser]:
    top = parser()
    groups = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for group in OURS:
        sub = groups.choices[group]
        action = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction))
        for name, p in action.choices.items():
            found[(group, name)] = p
    return found


def run(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_flag_and_argument_has_help() -> None:
    for (group, name), p in commands().items():
        for action in p._actions:
            assert action.help, (group, name, action.dest)


def test_every_read_command_takes_output_table_or_json() -> None:
    for key, p in commands().items():
        outputs = [a for a in p._actions if "--output" in a.option_strings]
        assert bool(outputs) is (key in READS), key
        if outputs:
            assert outputs[0].choices == ("table", "json")


def test_help_shows_defaults_and_the_command_after_double_dash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["job", "submit", "--help"])
    text = capsys.readouterr().out
    assert "-- COMMAND [ARG ...]" in text
    assert "(default: ml.g5.xlarge)" in text


@pytest.mark.parametrize(
    ("words", "field", "value"),
    [
        (["job", "list", "q", "--status", "running"], "status", "RUNNING"),
        (["pools", "list", "--status", "available"], "status", "AVAILABLE"),
        (
            ["share", "create", "q", "A", "--capacity", "ml.g5.xlarge=2", "--strategy", "lend"],
            "strategy",
            "LEND",
        ),
        (["nodes", "list", "-o", "JSON"], "output", "json"),
        (["queue", "update", "q", "--state", "disabled"], "state", "DISABLED"),
        (
            ["job", "watch", "--status", "succeeded", "--status", "Failed"],
            "status",
            ["SUCCEEDED", "FAILED"],
        ),
    ],
)
def test_enum_values_take_any_case(words: list[str], field: str, value: object) -> None:
    assert getattr(parser().parse_args(words), field) == value


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["job", "list", "q", "--status", "runing"], "choose from 'SUBMITTED'"),
        (["share", "create", "q", "A", "--capacity", "gpu"], "is not UNIT=N"),
        (["env", "create", "e", "--capacity", "ml.g5.xlarge=x"], "is not UNIT=N"),
        (["job", "submit", "q", "--name", "x"], "--share"),
        (["job", "submit", "q", "--share", "A", "--name", "x"], "after `--`"),
        (["job", "submit", "q", "--share", "A", "--name", "x", "--count", "0"], "1 or more"),
        (["nodes"], "required"),
        (["env", "update", "e"], "nothing to change"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], words: list[str], says: str
) -> None:
    code, out, err = run(capsys, *OFFLINE, *words)
    assert code == 2
    assert err.startswith("qm: error: ") and err.count("\n") == 1, err
    assert says in err
    assert "Traceback" not in out + err


def test_a_failed_call_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *OFFLINE, "job", "list", "q", "--status", "running")
    assert code == 1
    assert err.startswith("qm: error: UNAVAILABLE") and err.count("\n") == 1, err
    assert "Traceback" not in out + err


def test_the_job_command_is_what_follows_double_dash() -> None:
    words = ["job", "submit", "q", "--share", "A", "--name", "n", "--", "python", "-c", "x --y"]
    assert split_command(words) == (words[:7], ["python", "-c", "x --y"])
    assert split_command(["nodes", "list"]) == (["nodes", "list"], [])


def test_submit_many_reads_jsonl_and_yaml(tmp_path: Path) -> None:
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text(
        '{"name": "a", "command": ["sh", "-c", "true"]}\n\n'
        '{"name": "b", "share": "B", "command": ["true"], "priority": 3}\n'
    )
    yaml = tmp_path / "jobs.yaml"
    yaml.write_text(
        "- name: a\n  command: [sh, -c, 'true']\n- name: b\n  share: B\n  command: ['true']\n"
        "  priority: 3\n"
    )
    defaults = argparse.Namespace(queue="q", share="A")
    for path in (jsonl, yaml):
        requests = jobs.requests_of(jobs.read_entries(path), defaults)
        assert [(r.job_name, r.job_queue, r.quota_share_name) for r in requests] == [
            ("a", "q", "A"),
            ("b", "q", "B"),
        ]
        assert requests[1].scheduling_priority == 3


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"name": "a", "command": ["true"], "colour": "red"}\n', "unknown field(s) colour"),
        ('{"name": "a"}\n', "no command"),
        ("- name: a\n  command: [true]\n", "list of strings"),
        ('{"name": "a", "command": "python train.py"}\n', "list of strings"),
        ('{"command": ["true"]}\n', "needs name"),
        ("{not json\n", "not JSON"),
    ],
)
def test_submit_many_refuses_bad_entries_with_their_number(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / ("jobs.yaml" if text.startswith("-") else "jobs.jsonl")
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        jobs.requests_of(jobs.read_entries(path), argparse.Namespace(queue="q", share="A"))
    assert says in str(err.value)


def test_submit_many_of_a_missing_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, *OFFLINE, "job", "submit-many", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read" in err


def test_a_described_message_shows_as_one_row_per_nested_field() -> None:
    from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
    from quartermaster.cli.options import fields
    from quartermaster.client.shapes import aws_output

    job = pb.ServiceJobDetail(job_name="n", job_id="j1", tags={"team": "a"})
    job.attempts.add(host_ids=["node-1", "node-2"])
    job.status = pb.JOB_STATUS_RUNNING
    rows = dict(fields(aws_output(job)))
    assert rows["jobName"] == "n"
    assert rows["status"] == "RUNNING"
    assert rows["tags.team"] == "a"
    assert rows["attempts.0.hostIds.0"] == "node-1"


def test_qm_up_and_demo_flags_have_help_and_any_case_runtime() -> None:
    top = parser()
    groups = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("up", "demo"):
        for action in groups.choices[name]._actions:
            assert action.help, (name, action.dest)
    assert top.parse_args(["up", "--runtime", "Docker"]).runtime == "docker"
