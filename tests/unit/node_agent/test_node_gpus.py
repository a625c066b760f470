"""GPU discovery: the nvidia-smi parsers on recorded outputs, and a fake nvidia-smi on PATH."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from qm_node_agent.gpus import Gpu, detect_gpus, parse_list, parse_query_csv

RECORDED = Path(__file__).parents[2] / "fixtures" / "nvidia-smi"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_the_query_of_an_8x_h100_host_gives_eight_gpus_in_index_order() -> None:
    gpus = parse_query_csv(recorded("query-8x-h100.csv"))

    assert [gpu.index for gpu in gpus] == list(range(8))
    assert {gpu.name for gpu in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {gpu.memory_mib for gpu in gpus} == {81559}
    assert gpus[0].uuid == "GPU-3b1e7c4a-9d2f-5e8a-b6c1-0f4d2a7e9b13"


def test_the_query_of_a_1x_h200_host() -> None:
    assert parse_query_csv(recorded("query-1x-h200.csv")) == [
        Gpu(0, "NVIDIA H200", "GPU-a81f3c5d-7e2b-4f9a-b3d6-4c8e2a6f1d57", 143771)
    ]


def test_the_list_format_agrees_with_the_query() -> None:
    for machine in ("8x-h100", "1x-h200"):
        listed = parse_list(recorded(f"list-{machine}.txt"))
        queried = parse_query_csv(recorded(f"query-{machine}.csv"))
        assert [(g.index, g.name, g.uuid) for g in listed] == [
            (g.index, g.name, g.uuid) for g in queried
        ]
        assert all(g.memory_mib is None for g in listed)


def test_mig_devices_are_not_counted_as_gpus() -> None:
    gpus = parse_list(recorded("list-2x-a100-mig.txt"))

    assert [(g.index, g.name) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-40GB"),
        (1, "NVIDIA A100-SXM4-40GB"),
    ]


def test_memory_reported_as_not_available_is_none() -> None:
    gpus = parse_query_csv("0, NVIDIA H100 80GB HBM3, GPU-1, [N/A]\n")

    assert gpus == [Gpu(0, "NVIDIA H100 80GB HBM3", "GPU-1", None)]


def test_an_error_message_is_not_parsed_as_gpus() -> None:
    with pytest.raises(ValueError):
        parse_query_csv(recorded("driver-failure.txt"))
    assert parse_list(recorded("driver-failure.txt")) == []


# ---- detection with a fake nvidia-smi on PATH ------------------------------------------


def fake_nvidia_smi(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch, *, query: str | None, listing: str | None
) -> None:
    """`nvidia-smi` that prints recorded outputs; None: fails like a broken driver does."""
    bin_dir.mkdir()
    failure = RECORDED / "driver-failure.txt"

    def branch(name: str | None) -> str:
        if name is None:
            return f'cat "{failure}"; exit 9'
        return f'cat "{RECORDED / name}"; exit 0'

    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-L" ]; then\n'
        f"  {branch(listing)}\n"
        "fi\n"
        'case "$1" in --query-gpu=index,name,uuid,memory.total) ;; *) exit 2 ;; esac\n'
        '[ "$2" = "--format=csv,noheader" ] || exit 2\n'
        f"{branch(query)}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


async def test_detection_runs_the_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(
        tmp_path / "bin", monkeypatch, query="query-8x-h100.csv", listing="list-1x-h200.txt"
    )

    gpus = await detect_gpus()

    assert len(gpus) == 8
    assert gpus[7].memory_mib == 81559


async def test_detection_falls_back_to_the_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, query=None, listing="list-1x-h200.txt")

    assert [gpu.name for gpu in await detect_gpus()] == ["NVIDIA H200"]


async def test_a_broken_driver_means_no_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, query=None, listing=None)

    assert await detect_gpus() == []


async def test_no_nvidia_smi_means_no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    assert await detect_gpus() == []
