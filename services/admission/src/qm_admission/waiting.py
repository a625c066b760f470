"""Why RUNNABLE jobs wait, added to the documents the read model answers with (issue #8).

The reason is not stored in the projection: it depends on the whole queue (the
other shares' use, free hosts, stops under way), which any event may change, so
keeping it in Postgres would rewrite every RUNNABLE row of a queue on every
event. Admission folds the log anyway (its `LogFollower`), so it derives the
reason on read: one explained allocation step on that state (about 2 ms with
100k RUNNABLE jobs) answers every job of a read, and is reused by later reads
until the state moves on. A job the follower no longer sees RUNNABLE gets no
reason (the document is older than the state; the next read catches up).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from quartermaster.core import Explainer, State, WaitReason
from quartermaster.store import documents
from quartermaster.store.documents import Doc

Reads = Callable[[str, str], bool]  # (job_queue, quota_share) -> may the caller see its jobs


class WaitReasons:
    def __init__(self) -> None:
        self._explained: tuple[int, int, Explainer] | None = None  # id(state), seq, explainer

    def explainer(self, state: State) -> Explainer:
        """One explainer per state position: reads between two events share it."""
        cached = self._explained
        if cached is None or cached[0] != id(state) or cached[1] != state.seq:
            cached = (id(state), state.seq, Explainer(state))
            self._explained = cached
        return cached[2]

    def shown(self, docs: list[Doc], state: State, reads: Reads | None) -> list[Doc]:
        """The documents, each RUNNABLE job's with why it waits.

        Front-of-queue entries carry no status: they are RUNNABLE jobs by definition.
        `reads` (None: the caller sees everything) keeps other shares' job ids out.
        """
        explainer = self.explainer(state)
        out = []
        for doc in docs:
            reason = None
            if doc.get("status", "JOB_STATUS_RUNNABLE") == "JOB_STATUS_RUNNABLE":
                reason = explainer.why(str(doc.get("job_id", "")))
            if reason is None:
                out.append(doc)
                continue
            if reads is not None:
                reason = _visible(reason, state, reads)
            out.append(documents.showing_wait(doc, reason))
        return out


def _visible(reason: WaitReason, state: State, reads: Reads) -> WaitReason:
    """The reason with the ids of jobs the caller may not see blanked (their places stay,
    as in the queue snapshot); its message names no such job."""
    return msgspec.structs.replace(reason, job_ids=visible_ids(reason.job_ids, state, reads))


def visible_ids(job_ids: tuple[str, ...], state: State, reads: Reads | None) -> tuple[str, ...]:
    if reads is None:
        return job_ids
    return tuple(
        job_id if (job := state.jobs.get(job_id)) and reads(job.queue, job.share) else ""
        for job_id in job_ids
    )
