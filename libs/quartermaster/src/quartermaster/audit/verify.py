"""Replay audit: re-fold the log and re-run the pass wherever decisions were recorded.

A scheduler decides on the state it has folded (some position P of the log), then
appends that pass's decisions, one message per job queue plus one for host
liveness. Other writers may append between P and that message, and the log does
not record P. So for a decision message at seq S on subject X the verifier looks
for P among the positions that can have been the base:

- P >= the previous message on X (appends to X are fenced on it, so the
  scheduler had folded it),
- P <= S - 1, and the state's time at P equals the decisions' `at` (a pass stamps
  its decisions with the time of the state it decided on),

and accepts the message when the pass re-run at one of them gives exactly the
recorded decisions for X (`decide` limited to X's queue, or to host liveness).
The position just before the message is tried first (see `Verifier`); older ones
on a lagging replica that only moves forward, so a base older than an earlier
message's base (possible only with several schedulers splitting the queues) is
out of reach and shows as a difference.
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from collections.abc import Iterable

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import HOSTS_TOKEN, Envelope, Ignored, admit, decision_token
from quartermaster.audit.errors import PermanentAuditError
from quartermaster.core import PassPolicy, State, decide, fold
from quartermaster.core.model import JobStatus
from quartermaster.core.snapshot import restore, take
from quartermaster.eventlog import subjects

_HEARTBEAT_REASON = re.compile(r"no heartbeat for ([0-9.]+) s")
MAX_LAG = 100_000  # messages a pass's base may lie behind its append


class Difference(msgspec.Struct, frozen=True):
    """One recorded decision the re-run pass does not give (or one it gives that is missing).

    `index` is the decision's place in the recorded message (None: not recorded);
    `base` is the log position the pass was re-run at.
    """

    seq: int
    subject: str
    index: int | None
    recorded: ev.Event | None
    rederived: ev.Event | None
    base: int
    note: str = ""


class Report(msgspec.Struct):
    messages: int = 0
    events: int = 0
    decision_messages: int = 0
    decisions: int = 0
    passes: int = 0  # times the pass was re-run
    heartbeat_timeout_seconds: float | None = None
    unchecked: int = 0  # host-loss messages with no heartbeat timeout to judge them by
    raced: int = 0  # decision messages decided before the message preceding them
    differences: list[Difference] = []
    ignored: list[Ignored] = []  # events no follower folds (undecodable, wrong subject)

    @property
    def ok(self) -> bool:
        return not self.differences


class _Replica:
    """A state folded up to `pos`, with the envelopes fed after it still to fold."""

    def __init__(self) -> None:
        self.state = State()
        self.pos = 0
        self.pending: deque[Envelope] = deque()

    def fold_next(self) -> None:
        self.fold(self.pending.popleft())

    def fold(self, envelope: Envelope) -> None:
        state = self.state
        for event in envelope.events:
            fold(state, event)
        self.pos = envelope.seq

    def copy(self) -> _Replica:
        """Another replica at the same position (through a snapshot: indexes rebuilt)."""
        other = _Replica()
        other.state, other.pos = restore(take(self.state, self.pos))
        return other


class Verifier:
    """Feed envelopes in log order (from seq 1), then read `report`.

    Two replicas of the state: `head` holds everything before the message being
    checked (the usual base: the scheduler appended right after it folded), and
    `trail` lags, folding the envelopes it is given only when an older base must
    be searched, so a log whose passes all sit on their previous message is
    folded once.
    """

    def __init__(
        self,
        heartbeat_timeout_seconds: float | None = None,
        check_from: int = 1,
        reach: int = 1024,
    ) -> None:
        """`heartbeat_timeout_seconds` is the scheduler's setting; None reads it from the
        first host-loss decision of the log (the decision, or its reason, names it).

        With `check_from` > 1 the messages before it are only folded (one part of a
        log verified in parallel): the trail then starts `reach` messages before it,
        a copy of the head, and a base older than that is out of reach.
        """
        self.report = Report(heartbeat_timeout_seconds=heartbeat_timeout_seconds)
        self.check_from = check_from
        self.reach = reach
        self.head = _Replica()
        self.trail: _Replica | None = _Replica() if check_from <= 1 else None
        self._seen = 0
        self._last_on_subject: dict[str, int] = {}
        self._tokens: dict[str, str] = {}  # subject token -> queue name
        self._pass_policy = PassPolicy()

    # ---- feeding -------------------------------------------------------------
    def feed(self, envelope: Envelope) -> None:
        if self._seen == 0 and envelope.seq != 1:
            raise PermanentAuditError(
                f"verify needs the log from seq 1; this one starts at seq {envelope.seq}"
            )
        self._seen += 1
        checking = envelope.seq >= self.check_from
        events, ignored = admit(envelope)
        if checking:
            self.report.messages += 1
            self.report.events += len(envelope.events)
        if ignored:
            if checking:
                self.report.ignored.extend(ignored)
            envelope = Envelope(envelope.seq, envelope.subject, events)
        token = decision_token(envelope.subject)
        if token is not None:
            if checking:
                self.report.decision_messages += 1
                self.report.decisions += len(events)
                self._check(envelope, token)
            self._last_on_subject[envelope.subject] = envelope.seq
        self.head.fold(envelope)
        if self.trail is None:
            if envelope.seq >= self.check_from - self.reach:
                self.trail = self.head.copy()
            return
        self.trail.pending.append(envelope)
        while len(self.trail.pending) > MAX_LAG:
            self.trail.fold_next()

    def feed_all(self, envelopes: Iterable[Envelope]) -> Report:
        for envelope in envelopes:
            self.feed(envelope)
        return self.report

    # ---- checking one decision message ---------------------------------------
    def _check(self, envelope: Envelope, token: str) -> None:
        recorded: list[ev.Event] = list(envelope.events)
        head = self.head
        if not recorded:
            derived = self._rederive(head.state, token, recorded)
            note = "a decision message with no decisions"
            self._report(envelope, recorded, head.pos, derived, note)
            return
        if token == HOSTS_TOKEN:
            self._learn_heartbeat_timeout(recorded)
            if self.report.heartbeat_timeout_seconds is None:
                self.report.unchecked += 1  # nothing says when a host counts as silent
                return
        at = recorded[0].at
        lowest = self._last_on_subject.get(envelope.subject, 0)
        tried: tuple[int, list[ev.Event]] | None = None
        if self._candidate(head, lowest, at, recorded):
            derived = self._rederive(head.state, token, recorded)
            if _same(recorded, derived):
                return
            tried = (head.pos, derived)
        trail = self.trail  # an older base: walk forward from where the trail stands
        while trail is not None and trail.pos < head.pos and trail.state.now <= at:
            if self._candidate(trail, lowest, at, recorded):
                derived = self._rederive(trail.state, token, recorded)
                if _same(recorded, derived):
                    self.report.raced += 1
                    return
            if not trail.pending or trail.pending[0].seq >= head.pos:
                break  # the head has tried the position before the message
            trail.fold_next()
        if tried is None:
            note = "no position before it has the decisions' time"
            derived = self._rederive(head.state, token, recorded)
            self._report(envelope, recorded, head.pos, derived, note)
        else:
            self._report(envelope, recorded, *tried, note="")

    def _candidate(
        self, replica: _Replica, lowest: int, at: float, recorded: list[ev.Event]
    ) -> bool:
        return (
            replica.pos >= lowest
            and replica.state.now == at
            and self._plausible(replica.state, recorded)
        )

    def _rederive(self, state: State, token: str, recorded: list[ev.Event]) -> list[ev.Event]:
        """The pass on `state`, limited to what subject `token` carries."""
        self.report.passes += 1
        policy = self._policy()
        if token == HOSTS_TOKEN:
            liveness = claimed_liveness(state, recorded)
            decided = decide(state, policy, queues=frozenset(), hosts=True, liveness=liveness)
            return [d for d in decided if isinstance(d, ev.HostLost)]
        queue = self._queue_for(state, token)
        if queue is None:
            return []
        decided = decide(state, policy, queues=frozenset({queue}), hosts=False)
        return [d for d in decided if _queue_of(state, d) == queue]

    def _policy(self) -> PassPolicy:
        timeout = self.report.heartbeat_timeout_seconds
        if self._pass_policy.heartbeat_timeout_seconds != timeout:
            self._pass_policy = PassPolicy(heartbeat_timeout_seconds=timeout)
        return self._pass_policy

    def _queue_for(self, state: State, token: str) -> str | None:
        if token not in self._tokens or self._tokens[token] not in state.queues:
            self._tokens = {subjects.token(q): q for q in state.queues}
        return self._tokens.get(token)

    @staticmethod
    def _plausible(state: State, recorded: list[ev.Event]) -> bool:
        """Cheap necessary conditions for the pass to give these decisions here."""
        jobs = state.jobs
        for d in recorded:
            job_id = getattr(d, "job_id", None)
            if job_id is not None and job_id not in jobs:
                return False
            if isinstance(d, ev.JobDispatched) and jobs[d.job_id].status is not JobStatus.RUNNABLE:
                return False
            if isinstance(d, ev.JobPreemptionRequested):
                target = jobs.get(d.for_job)
                if target is None or target.status is not JobStatus.RUNNABLE:
                    return False
        return True

    def _learn_heartbeat_timeout(self, recorded: list[ev.Event]) -> None:
        if self.report.heartbeat_timeout_seconds is None:
            self.report.heartbeat_timeout_seconds = recorded_heartbeat_timeout(recorded)

    def _report(
        self,
        envelope: Envelope,
        recorded: list[ev.Event],
        base: int,
        derived: list[ev.Event],
        note: str,
    ) -> None:
        """Pair recorded and re-derived decisions (a diff), one Difference per mismatch."""
        out = self.report.differences
        if not recorded and not derived:
            out.append(Difference(envelope.seq, envelope.subject, None, None, None, base, note))
            return
        a = [ev.to_json(d) for d in recorded]
        # A re-derived decision equal to a recorded one (reason fields it left unset aside)
        # gets that one's key, so the diff pairs them as equal.
        b = [
            next(
                (k for r, k in zip(recorded, a, strict=True) if ev.same_decision(r, d)),
                ev.to_json(d),
            )
            for d in derived
        ]
        matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                rec = recorded[i1 + k] if i1 + k < i2 else None
                der = derived[j1 + k] if j1 + k < j2 else None
                index = i1 + k if rec is not None else None
                out.append(Difference(envelope.seq, envelope.subject, index, rec, der, base, note))


def claimed_liveness(state: State, recorded: Iterable[ev.Event]) -> dict[str, float]:
    """The liveness a host-loss message was judged on, as far as the log can tell.

    Heartbeats are not in the log (a KV bucket holds them), so a loss is checked
    against what it records: its host silent since `last_heartbeat_at`, every other
    host alive now. The pass then re-judges that claim with the log's own signs of
    life (a registration after the claimed instant refutes it) and the timeout.
    """
    liveness = dict.fromkeys(state.hosts, state.now)
    for d in recorded:
        if not isinstance(d, ev.HostLost):
            continue
        if d.last_heartbeat_at is None:  # a log from before losses said: its own heartbeats
            liveness.pop(d.host_id, None)
        else:
            liveness[d.host_id] = d.last_heartbeat_at
    return liveness


def recorded_heartbeat_timeout(decisions: Iterable[ev.Event]) -> float | None:
    """The heartbeat timeout a host-loss decision was judged with, if it says."""
    for d in decisions:
        if not isinstance(d, ev.HostLost):
            continue
        if d.heartbeat_timeout_seconds is not None:
            return d.heartbeat_timeout_seconds
        found = _HEARTBEAT_REASON.search(d.reason)  # recorded before the field existed
        if found:
            return float(found.group(1))
    return None


def _queue_of(state: State, decision: ev.Event) -> str | None:
    """The queue whose subject carries a decision (as the scheduler groups them)."""
    job_id = getattr(decision, "job_id", None)
    if job_id is None:
        return None
    job = state.jobs.get(job_id)
    if job is not None:
        return job.queue
    pool = state.pools.get(job_id)
    return pool.queue if pool is not None else None


def _same(recorded: list[ev.Event], derived: list[ev.Event]) -> bool:
    """Equal decisions, reading reason fields an older record left unset as not recorded."""
    if recorded == derived:  # a log that records every field: one comparison
        return True
    return len(recorded) == len(derived) and all(
        ev.same_decision(r, d) for r, d in zip(recorded, derived, strict=True)
    )


def verify(envelopes: Iterable[Envelope], heartbeat_timeout_seconds: float | None = None) -> Report:
    """Verify a whole log (see the module docstring)."""
    return Verifier(heartbeat_timeout_seconds).feed_all(envelopes)
