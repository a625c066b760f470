"""Where the client finds a write's log position: the trailer it asks for, else the
initial metadata (a server that does not know `x-qm-seq-in` answers there)."""

from __future__ import annotations

from quartermaster.client.connection import SEQ_IN_TRAILER, answered_seq


class Answered:
    """Our own stand-in for a finished call: just its two metadata."""

    def __init__(self, initial: tuple[tuple[str, str], ...], trailing: tuple[tuple[str, str], ...]):
        self._initial, self._trailing = initial, trailing

    def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._initial

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._trailing


def test_the_client_asks_for_the_trailer() -> None:
    assert SEQ_IN_TRAILER == ("x-qm-seq-in", "trailer")


def test_the_seq_is_read_from_the_trailer() -> None:
    assert answered_seq(Answered((), (("x-qm-field", "x"), ("x-qm-seq", "42")))) == 42


def test_a_server_that_answers_in_the_initial_metadata_is_understood() -> None:
    assert answered_seq(Answered((("x-qm-seq", "7"),), ())) == 7


def test_a_read_answers_no_seq() -> None:
    assert answered_seq(Answered((), ())) == 0
