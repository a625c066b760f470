"""Settings come from prefixed environment variables, typed, with defaults."""

import pytest

from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.settings import WarmPoolSettings
from quartermaster.envsettings import SettingsError


def test_scheduler_settings_from_env() -> None:
    s = SchedulerSettings.from_env(
        {
            "QM_SCHEDULER_QUEUES": "a,b",
            "QM_SCHEDULER_LEASE_TTL_SECONDS": "4",
            "QM_SCHEDULER_INSTANCE_ID": "s-1",
        }
    )
    assert (s.queues, s.lease_ttl_seconds, s.instance_id) == (("a", "b"), 4.0, "s-1")
    assert s.snapshot_every == 2000  # default kept
    assert SchedulerSettings.from_env({}).instance_id  # a name is always given


def test_bad_value_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="QM_WARMPOOL_"):
        WarmPoolSettings.from_env({"QM_WARMPOOL_TICK_SECONDS": "soon"})
