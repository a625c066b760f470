"""`python -m qm_scheduler`: the scheduler's composition root."""

from __future__ import annotations

from qm_scheduler import identity
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster.eventlog import process


def main() -> None:
    with identity.claim(SchedulerSettings.from_env()) as s:
        process.main(
            process.serve(
                s,
                "qm-scheduler",
                lambda event_log: Scheduler(s, event_log).run(),
            )
        )


if __name__ == "__main__":
    main()
