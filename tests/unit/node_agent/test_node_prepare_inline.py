"""Where the process runtime lays out an attempt's /opt/ml tree: on the agent's loop when
that only rewrites a few small files of a kept tree, in a worker thread otherwise."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from process_attempt import attempt

from qm_node_agent.contract.host import needs_lookup
from qm_node_agent.contract.stage import SKELETON, prepare, reset_chain_tree
from qm_node_agent.runtime import process
from qm_node_agent.runtime.process import ProcessRuntime
from qm_node_agent.spares import Spares

RUN_TRUE: dict[str, object] = {
    "AlgorithmSpecification": {"TrainingImage": "x", "ContainerEntrypoint": ["true"]}
}


def keep_a_tree(spares: Spares, root: Path) -> None:
    """A chain's tree that a job wrote in, given back (reset) as the agent does."""
    chain = root / "opt-ml" / "old"
    for sub in SKELETON:
        (chain / "ml" / sub).mkdir(parents=True)
    (chain / "ml" / "model" / "m.bin").write_bytes(b"m" * 1000)
    (chain / "hosts").write_text("127.0.0.1 algo-1\n")
    spares.give_tree(chain, reset_chain_tree)


def launch_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    kept: bool,
    payload: dict[str, object] = RUN_TRUE,
    address: str = "127.0.0.1",
) -> tuple[bool, Path]:
    """Launch `payload`'s attempt; whether its prepare ran on the loop's thread, and
    its tree."""
    spares = Spares(tmp_path / "spares")
    if kept:
        keep_a_tree(spares, tmp_path)
    threads: list[int] = []

    def watched(*args: object, **kwargs: object) -> object:
        threads.append(threading.get_ident())
        return prepare(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(process, "prepare", watched)
    chain = tmp_path / "opt-ml" / "j"
    spec, record = attempt(tmp_path, payload, address=address)

    async def main() -> bool:
        runtime = ProcessRuntime(spares, namespaces=False)
        job = await runtime.launch(spec, record)
        assert (await job.wait()).exit_code == 0
        return threads == [threading.get_ident()]

    return asyncio.run(main()), chain


def test_a_kept_tree_with_nothing_to_stage_is_laid_out_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_loop, chain = launch_once(tmp_path, monkeypatch, kept=True)

    assert on_loop
    assert (chain / "ml" / "input" / "config" / "resourceconfig.json").is_file()
    assert not (chain / "ml" / "model" / "m.bin").exists()  # the reset emptied it
    assert "127.0.0.1\talgo-1" in (chain / "hosts").read_text()


def test_a_new_tree_is_laid_out_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_loop, chain = launch_once(tmp_path, monkeypatch, kept=False)

    assert not on_loop
    assert (chain / "ml" / "input" / "config" / "resourceconfig.json").is_file()


def test_channels_and_names_to_look_up_go_to_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "train"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    with_channel: dict[str, object] = RUN_TRUE | {
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {"FileSystemDataSource": {"DirectoryPath": str(data)}},
            }
        ]
    }
    on_loop, chain = launch_once(tmp_path / "a", monkeypatch, kept=True, payload=with_channel)
    assert not on_loop
    assert (chain / "ml" / "input" / "data" / "train" / "a.csv").read_text() == "1\n"

    on_loop, _ = launch_once(tmp_path / "b", monkeypatch, kept=True, address="localhost")
    assert not on_loop


@pytest.mark.parametrize(
    ("address", "lookup"),
    [
        ("", False),
        ("10.0.0.7", False),
        ("10.0.0.7:9000", False),
        ("localhost", True),
        ("node-3.cluster.local:9000", True),
        ("::1", True),  # gethostbyname answers IPv4 only: an IPv6 one goes to NSS
    ],
)
def test_only_names_need_a_lookup(address: str, lookup: bool) -> None:
    assert needs_lookup(address) is lookup
