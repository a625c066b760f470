"""`python -m qm_warmpool`: the warm-pool service's composition root."""

from __future__ import annotations

from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster.eventlog import process


def main() -> None:
    s = WarmPoolSettings.from_env()
    process.main(
        process.serve(
            s,
            "qm-warmpool",
            lambda event_log: WarmPoolService(s, event_log).run(),
        )
    )


if __name__ == "__main__":
    main()
