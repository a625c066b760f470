"""Why a RUNNABLE job waits (spec section 9): a code, the inputs, and a line a person reads.

`blocked` names the limit that stops a share's head on the pass's capacity
overlay; the other builders cover jobs behind a head, heads waiting for stops,
and jobs the pass never considers.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from quartermaster.core.capacity import CapacityView
from quartermaster.core.model import Job
from quartermaster.events import SharingStrategy


class WaitCode(StrEnum):
    SHARE_AT_LIMIT = "SHARE_AT_LIMIT"  # a RESERVE / LEND share holds its whole limit
    BORROW_LIMIT_REACHED = "BORROW_LIMIT_REACHED"  # borrowing blocked: borrowLimit reached
    NO_LENDABLE_CAPACITY = "NO_LENDABLE_CAPACITY"  # borrowing blocked: nothing left to lend
    RESERVE_HELD_BACK = "RESERVE_HELD_BACK"  # free units are RESERVE shares' idle capacity
    BEHIND_IN_SHARE = "BEHIND_IN_SHARE"  # higher-priority (or older) jobs of its share first
    WAITING_FOR_STOP = "WAITING_FOR_STOP"  # units it needs are stopping (victims, ...)
    NOT_ENOUGH_FREE_HOSTS = "NOT_ENOUGH_FREE_HOSTS"  # a job (or gang) needs n hosts, m free
    MISCONFIGURATION = "MISCONFIGURATION"  # can never fit (statusReason MISCONFIGURATION:...)
    ENVIRONMENT_DISABLED = "ENVIRONMENT_DISABLED"  # its queue's environment is DISABLED
    AWAITING_PASS = "AWAITING_PASS"  # nothing stops it: the next pass places it


class WaitReason(msgspec.Struct, frozen=True, kw_only=True):
    code: WaitCode
    message: str
    needed: int = 0  # units (instances) the job needs
    held: int = 0  # units its share holds now
    limit: int = 0  # the share limit in the way: its own limit, or own + borrowLimit
    free: int = 0  # units it could get: free hosts, or lendable units left
    jobs_ahead: int = 0
    job_ids: tuple[str, ...] = ()  # the head it waits behind, or the jobs being stopped
    shares: tuple[str, ...] = ()  # RESERVE shares holding their idle units back


def _say(code: WaitCode, detail: str) -> str:
    return f"WAITING:{code.value} - {detail}"


def _named(job: Job) -> str:
    return job.job_name if job.job_name == job.job_id else f"{job.job_name} ({job.job_id})"


def blocked(view: CapacityView, name: str, job: Job) -> WaitReason:
    """The limit that stops share `name`'s head `job` on the overlay as it stands."""
    share, unit, n = view.shares[name], view.unit, job.count
    held, own = view.use[name], view.own(name)
    borrows = held + n > own
    if borrows and share.strategy is not SharingStrategy.LEND_AND_BORROW:
        code = WaitCode.SHARE_AT_LIMIT
        detail = f"quota share {name} is at its limit ({held} of {own} {unit} in use)"
        return WaitReason(
            code=code, message=_say(code, f"{detail}; needs {n}"), needed=n, held=held, limit=own
        )
    cap = share.cap(unit)
    if borrows and cap is not None and held + n > cap:
        code = WaitCode.BORROW_LIMIT_REACHED
        detail = (
            f"borrowing blocked: quota share {name} holds {held} {unit} and its "
            f"borrowLimit allows {cap} ({own} + {share.borrow_limit}%); needs {n}"
        )
        return WaitReason(code=code, message=_say(code, detail), needed=n, held=held, limit=cap)
    free = view.physical_free()
    reserved = view.reserve_idle(name)
    if free >= n and free - sum(reserved.values()) < n:
        code = WaitCode.RESERVE_HELD_BACK
        names = ", ".join(sorted(reserved))
        detail = (
            f"RESERVE capacity held back: {free} {unit} free, {sum(reserved.values())} of "
            f"them idle units of RESERVE quota share {names}; needs {n}"
        )
        return WaitReason(
            code=code,
            message=_say(code, detail),
            needed=n,
            held=held,
            free=free,
            shares=tuple(sorted(reserved)),
        )
    if borrows:
        # What other shares can still lend: their idle units plus unassigned capacity,
        # less what is borrowed already (the share's own idle units are its own).
        spare = max(0, view.lendable() - view.idle(name) - view.borrowed())
        to_borrow = held + n - max(held, own)
        if spare < to_borrow:
            code = WaitCode.NO_LENDABLE_CAPACITY
            detail = (
                f"borrowing blocked: quota share {name} needs to borrow {to_borrow} {unit}, "
                f"{spare} lendable idle {'unit is' if spare == 1 else 'units are'} left"
            )
            return WaitReason(
                code=code,
                message=_say(code, detail),
                needed=n,
                held=held,
                limit=cap if cap is not None else 0,
                free=spare,
            )
    if free < n:
        return not_enough_hosts(n, free, unit, held, own)
    return awaiting_pass(job)


def not_enough_hosts(n: int, free: int, unit: str, held: int = 0, limit: int = 0) -> WaitReason:
    code = WaitCode.NOT_ENOUGH_FREE_HOSTS
    if n > 1:
        detail = f"a gang of {n} needs {n} free {unit} hosts; {free} free"
    else:
        detail = f"needs a free {unit} host; none is free"
    return WaitReason(
        code=code, message=_say(code, detail), needed=n, held=held, limit=limit, free=free
    )


def behind(job: Job, ahead: int, head: Job) -> WaitReason:
    code = WaitCode.BEHIND_IN_SHARE
    jobs = "job" if ahead == 1 else "jobs"
    detail = (
        f"behind {ahead} higher-priority or older {jobs} of quota share {job.share} "
        f"(first: {_named(head)})"
    )
    return WaitReason(
        code=code,
        message=_say(code, detail),
        needed=job.count,
        jobs_ahead=ahead,
        job_ids=(head.job_id,),
    )


def waiting_for_stop(job: Job, units: int, stopping: list[Job], unit: str) -> WaitReason:
    code = WaitCode.WAITING_FOR_STOP
    # Shares, not job names: the job's owner may not see other shares' jobs (job_ids may).
    shares = ", ".join(sorted({j.share for j in stopping}))
    jobs = "job" if len(stopping) == 1 else "jobs"
    detail = (
        f"waiting for {units} {unit} that {len(stopping)} stopping {jobs} "
        f"of quota share {shares} free"
    )
    return WaitReason(
        code=code,
        message=_say(code, detail),
        needed=job.count,
        free=units,
        job_ids=tuple(j.job_id for j in stopping),
    )


def misconfigured(job: Job, text: str, allowed: int) -> WaitReason:
    return WaitReason(code=WaitCode.MISCONFIGURATION, message=text, needed=job.count, limit=allowed)


def environment_disabled(job: Job, environment: str) -> WaitReason:
    code = WaitCode.ENVIRONMENT_DISABLED
    detail = f"service environment {environment} is DISABLED"
    return WaitReason(code=code, message=_say(code, detail), needed=job.count)


def awaiting_pass(job: Job) -> WaitReason:
    code = WaitCode.AWAITING_PASS
    detail = "nothing stops it; the next scheduling pass places it"
    return WaitReason(code=code, message=_say(code, detail), needed=job.count)
