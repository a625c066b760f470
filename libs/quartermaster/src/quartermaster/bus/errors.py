"""Errors of the bus adapters: one base, split into transient and permanent.

Transient: the server is unreachable, slow or restarting; the same call may succeed
later (appends are safe to retry when they carry a msg id). Permanent: the request
itself is wrong for the stream as it is (fenced, bad config); retrying it as is fails.
"""

from __future__ import annotations


class BusError(Exception):
    """Base error of `quartermaster.bus`."""


class TransientBusError(BusError):
    """Timeout, lost connection, no responders, server busy: retry with backoff."""


class PermanentBusError(BusError):
    """Rejected by the server for a reason a retry does not change."""


class FencedAppendError(PermanentBusError):
    """An append carried an expected last sequence and the stream had moved on.

    Another writer appended first: reload state up to `actual_last_seq`, decide again.
    """

    def __init__(
        self, subject: str, expected_last_seq: int, actual_last_seq: int | None, detail: str
    ) -> None:
        super().__init__(
            f"append to {subject} fenced: expected last seq {expected_last_seq}, "
            f"stream is at {actual_last_seq if actual_last_seq is not None else '?'} ({detail})"
        )
        self.subject = subject
        self.expected_last_seq = expected_last_seq
        self.actual_last_seq = actual_last_seq


class BatchAppendError(BusError):
    """Some items of a pipelined batch failed; `seqs[i]` is None where item i failed.

    Items after a failed one may still have been stored: retry the whole batch with the
    same msg ids (stored ones dedupe to their first seq). `errors` maps index to error.
    Raised as `TransientBatchAppendError` when every failure is transient, else as
    `PermanentBatchAppendError`, so `except TransientBusError` retry loops catch it.
    """

    def __init__(self, seqs: list[int | None], errors: dict[int, BusError]) -> None:
        first = min(errors)
        super().__init__(
            f"{len(errors)} of {len(seqs)} appends failed; first is #{first}: {errors[first]}"
        )
        self.seqs = seqs
        self.errors = errors

    @staticmethod
    def of(seqs: list[int | None], errors: dict[int, BusError]) -> BatchAppendError:
        if all(isinstance(e, TransientBusError) for e in errors.values()):
            return TransientBatchAppendError(seqs, errors)
        return PermanentBatchAppendError(seqs, errors)


class TransientBatchAppendError(BatchAppendError, TransientBusError):
    """Every failed item of the batch failed transiently."""


class PermanentBatchAppendError(BatchAppendError, PermanentBusError):
    """At least one item of the batch was rejected for good (fenced, bad request)."""
