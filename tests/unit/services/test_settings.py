"""Settings come from prefixed environment variables, typed, with defaults."""

import msgspec
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


def test_every_service_reads_the_same_bus_settings() -> None:
    from qm_admission.settings import Settings as AdmissionSettings
    from qm_node_agent.settings import NodeSettings
    from quartermaster.bus.access import server_list

    def env(prefix: str) -> dict[str, str]:
        return {
            f"{prefix}NATS_URL": "nats://10.0.0.1:4222, nats://10.0.0.2:4222,nats://10.0.0.3:4222",
            f"{prefix}NATS_USER": "svc",
            f"{prefix}NATS_PASSWORD": "pw",
            f"{prefix}NATS_TLS_CA": "/creds/ca.pem",
            f"{prefix}STREAM_REPLICAS": "3",
        }

    readers = {
        "QM_SCHEDULER_": SchedulerSettings.from_env,
        "QM_WARMPOOL_": WarmPoolSettings.from_env,
        "QM_ADMISSION_": AdmissionSettings.from_env,
    }
    for prefix, read in readers.items():
        s = read(env(prefix))
        assert len(server_list(s.nats_url)) == 3
        creds = s.nats_credentials()
        assert (creds.user, creds.password, creds.tls_ca, s.stream_replicas) == (
            "svc",
            "pw",
            "/creds/ca.pem",
            3,
        )
        plain = msgspec.structs.replace(creds, tls_ca="")
        assert plain.connect_options() == {"user": "svc", "password": "pw"}
    node_env = env("QM_NODE_") | {
        "QM_NODE_HOST_ID": "h1",
        "QM_NODE_INSTANCE_TYPE": "ml.g5.xlarge",
        "QM_NODE_DATA_DIR": "/tmp/h1",
    }
    node = NodeSettings.from_env(node_env)
    assert (node.nats_credentials.user, node.stream_replicas) == ("svc", 3)


def test_one_url_is_a_cluster_of_one_and_no_tls_without_a_ca() -> None:
    from quartermaster.bus.access import NatsCredentials, server_list

    assert server_list("nats://127.0.0.1:4222") == ["nats://127.0.0.1:4222"]
    assert NatsCredentials().connect_options() == {}
