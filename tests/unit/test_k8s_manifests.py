"""deploy/k8s, checked offline: the Kubernetes schemas (kubernetes-validate), then what the
manifests must say for the stack to run: probes and resources everywhere, GPUs for the node
agents, disruption budgets, three NATS replicas, and settings the services really read."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import msgspec
import pytest
import yaml

from qm_admission.settings import Settings as AdmissionSettings
from qm_node_agent.settings import NodeSettings
from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.settings import WarmPoolSettings
from quartermaster.bus.access import BusSettings

DEPLOY = Path(__file__).parents[2] / "deploy"
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))
# The oldest Kubernetes the manifests promise to fit, and the newest the schemas know.
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
PROBE_VARIABLES = {"QM_PROBE_CA_FILE", "QM_PROBE_SERVER_NAME", "QM_PROBE_CERT_FILE"}
PROBE_VARIABLES |= {"QM_PROBE_KEY_FILE"}


def settings_names() -> dict[str, set[str]]:
    """Environment prefix -> the variables each service reads (its settings' fields)."""
    bus = set(BusSettings.__struct_fields__)
    node = {f.name for f in dataclasses.fields(NodeSettings)} - {"nats_credentials"}
    return {
        "QM_ADMISSION_": set(AdmissionSettings.__struct_fields__),
        "QM_SCHEDULER_": set(SchedulerSettings.__struct_fields__),
        "QM_WARMPOOL_": set(WarmPoolSettings.__struct_fields__),
        "QM_NODE_": node | bus,
    }


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


RESOURCES = [(path.name, doc) for path in MANIFESTS for doc in load(path)]


def named(kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        doc
        for _, doc in RESOURCES
        if doc["kind"] == kind and name in (None, doc["metadata"]["name"])
    ]


def workloads() -> list[dict[str, Any]]:
    return [doc for _, doc in RESOURCES if doc["kind"] in WORKLOADS]


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: dict[str, Any], *, init: bool = False) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pod(workload).get("initContainers" if init else "containers", [])
    return found


def env_vars(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for container in containers(workload) + containers(workload, init=True):
        yield from container.get("env", [])


def env_value(workload: dict[str, Any], name: str) -> str:
    """A variable's value, following configMapKeyRef into the manifests' ConfigMaps."""
    (var,) = [v for v in env_vars(workload) if v["name"] == name]
    if "value" in var:
        return str(var["value"])
    ref = var["valueFrom"]["configMapKeyRef"]
    (config,) = named("ConfigMap", ref["name"])
    return str(config["data"][ref["key"]])


def quartermaster_services() -> list[dict[str, Any]]:
    return [w for w in workloads() if any(v["name"].endswith("_NATS_URL") for v in env_vars(w))]


def test_the_manifests_are_there() -> None:
    assert len(MANIFESTS) >= 5
    assert all(load(path) for path in MANIFESTS)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("file", "resource"), RESOURCES, ids=[f for f, _ in RESOURCES])
def test_manifest_matches_the_kubernetes_schema(
    file: str, resource: dict[str, Any], version: str
) -> None:
    kubernetes_validate.validate(resource, version, strict=True)


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_container_has_probes_and_resources(workload: dict[str, Any]) -> None:
    for container in containers(workload):
        assert "livenessProbe" in container, container["name"]
        assert "readinessProbe" in container, container["name"]
    for container in containers(workload) + containers(workload, init=True):
        resources = container.get("resources", {})
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources.get(bound, {})), (container["name"], bound)


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_pods_run_as_non_root_with_their_own_service_account(workload: dict[str, Any]) -> None:
    spec = pod(workload)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    (account,) = named("ServiceAccount", spec["serviceAccountName"])
    assert account["automountServiceAccountToken"] is False
    for container in containers(workload):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert context.get("runAsUser", 1) != 0


def test_node_agents_are_a_daemonset_requesting_gpus() -> None:
    agents = [d for d in named("DaemonSet") if "node-agent" in d["metadata"]["name"]]
    assert agents
    for agent in agents:
        (container,) = containers(agent)
        resources = container["resources"]
        assert int(resources["limits"]["nvidia.com/gpu"]) > 0
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]
        assert env_value(agent, "QM_NODE_RUNTIME") == "docker"
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/var/run/docker.sock" in mounts
        # Job caches are bind-mounted by host path: the data dir is the same path on the node.
        data_dir = env_value(agent, "QM_NODE_DATA_DIR")
        (volume,) = [
            v for v in pod(agent)["volumes"] if v.get("hostPath", {}).get("path") == data_dir
        ]
        assert any(
            m["name"] == volume["name"] and m["mountPath"] == data_dir
            for m in container["volumeMounts"]
        )


@pytest.mark.parametrize("app", ["qm-scheduler", "qm-admission", "nats"])
def test_disruption_budgets_cover_the_replicated_services(app: str) -> None:
    (workload,) = [w for w in workloads() if w["metadata"]["name"] == app]
    labels = workload["spec"]["template"]["metadata"]["labels"]
    budgets = [
        pdb
        for pdb in named("PodDisruptionBudget")
        if pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    assert len(budgets) == 1
    assert workload["spec"]["replicas"] >= 2


def bootstrap_args() -> list[str]:
    (job,) = named("Job", "qm-bootstrap")
    (container,) = containers(job)
    args: list[str] = container["args"]
    return args


def test_nats_is_a_three_node_jetstream_cluster() -> None:
    (nats,) = named("StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    (service,) = named("Service", nats["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    (config,) = named("ConfigMap", "qm-nats-config")
    assert "jetstream" in config["data"]["nats.conf"]
    # The routes are rendered by the bootstrap into nats-cluster.conf, with their user.
    routes = set(re.findall(r"--route=nats://(nats-\d)\.nats:6222", " ".join(bootstrap_args())))
    assert routes == {f"nats-{n}" for n in range(3)}


def test_nats_takes_users_and_tls_from_the_bootstrap() -> None:
    """nats.conf includes the files `qm deploy bootstrap` renders (users with qm up's
    permissions and client TLS; route TLS and user), from the Secret it writes, mounted
    where the rendered file paths point."""
    from quartermaster.deploy.secrets import DeployPlan

    (config,) = named("ConfigMap", "qm-nats-config")
    text = config["data"]["nats.conf"]
    assert 'include "../nats-secrets/nats-auth.conf"' in text
    cluster = text[text.index("cluster {") :]
    assert 'include "../nats-secrets/nats-cluster.conf"' in cluster
    (nats,) = named("StatefulSet", "nats")
    (container,) = containers(nats)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/nats"] == "config"
    volume = next(
        v for v in pod(nats)["volumes"] if v["name"] == mounts[DeployPlan(hosts=()).nats_dir]
    )
    assert volume["secret"]["secretName"] == "qm-bootstrap-nats"


def test_the_bootstrap_job_writes_every_secret_the_services_mount() -> None:
    """Each `qm-bootstrap-*` Secret a pod mounts is a part the Job writes, its Role may write
    exactly those, and the Job runs as non-root like every pod."""
    from quartermaster.deploy.kube import secret_name
    from quartermaster.deploy.secrets import PARTS

    written = {secret_name(part) for part in PARTS}
    mounted = {
        volume["secret"]["secretName"]
        for workload in workloads()
        for volume in pod(workload).get("volumes", [])
        if volume.get("secret", {}).get("secretName", "").startswith("qm-bootstrap-")
    }
    assert mounted == written - {secret_name("credentials")}  # the CA key stays with the Job
    (role,) = named("Role", "qm-bootstrap")
    by_verb = {verb: rule for rule in role["rules"] for verb in rule["verbs"]}
    assert set(by_verb["update"]["resourceNames"]) == written
    assert {r for rule in role["rules"] for r in rule["resources"]} == {"secrets"}
    (job,) = named("Job", "qm-bootstrap")
    assert pod(job)["securityContext"]["runAsNonRoot"] is True
    assert pod(job)["securityContext"]["runAsUser"] != 0
    (container,) = containers(job)
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "--k8s-secrets" in container["args"]
    assert "--replicas=$(STREAM_REPLICAS)" in container["args"]


@pytest.mark.parametrize("workload", quartermaster_services(), ids=lambda w: w["metadata"]["name"])
def test_services_log_in_to_nats_with_files_of_their_secret(workload: dict[str, Any]) -> None:
    """No service is anonymous on the bus: its user, password and client certificate are
    files of its `qm-bootstrap-*` Secret (read by the settings' `<NAME>_FILE` variables)."""
    (container,) = containers(workload)
    (prefix,) = {v["name"].removesuffix("NATS_URL") for v in env_vars(workload)} & {
        "QM_ADMISSION_",
        "QM_SCHEDULER_",
        "QM_WARMPOOL_",
        "QM_NODE_",
    }
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "secrets"]
    for name in ("NATS_USER_FILE", "NATS_PASSWORD_FILE", "NATS_TLS_CA", "NATS_TLS_CERT"):
        path = env_value(workload, prefix + name)
        assert path.startswith(mount["mountPath"] + "/"), name


@pytest.mark.parametrize("workload", quartermaster_services(), ids=lambda w: w["metadata"]["name"])
def test_services_are_probed_on_their_health_endpoints(workload: dict[str, Any]) -> None:
    """/readyz decides readiness and /livez liveness (docs/observability.md), on the port the
    service serves them on (its METRICS_PORT), reachable by the kubelet (not loopback)."""
    (container,) = containers(workload)
    (prefix,) = {v["name"].removesuffix("NATS_URL") for v in env_vars(workload)} & {
        "QM_ADMISSION_",
        "QM_SCHEDULER_",
        "QM_WARMPOOL_",
        "QM_NODE_",
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert str(ports["health"]) == env_value(workload, f"{prefix}METRICS_PORT")
    assert env_value(workload, f"{prefix}METRICS_HOST") == "0.0.0.0"
    paths = {
        probe: container[probe]["httpGet"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    assert paths == {
        "startupProbe": {"path": "/livez", "port": "health"},
        "readinessProbe": {"path": "/readyz", "port": "health"},
        "livenessProbe": {"path": "/livez", "port": "health"},
    }


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_services_use_the_cluster_and_three_stream_replicas(workload: dict[str, Any]) -> None:
    for prefix in settings_names():
        names = {v["name"] for v in env_vars(workload)}
        if f"{prefix}NATS_URL" not in names:
            continue
        assert len(env_value(workload, f"{prefix}NATS_URL").split(",")) == 3
        assert env_value(workload, f"{prefix}STREAM_REPLICAS") == "3"


def test_two_schedulers_named_after_their_pods() -> None:
    (scheduler,) = named("Deployment", "qm-scheduler")
    assert scheduler["spec"]["replicas"] == 2
    (var,) = [v for v in env_vars(scheduler) if v["name"] == "QM_SCHEDULER_INSTANCE_ID"]
    assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_admission_reads_the_database_url_from_a_secret() -> None:
    (admission,) = named("Deployment", "qm-admission")
    (var,) = [v for v in env_vars(admission) if v["name"] == "QM_ADMISSION_POSTGRES_URL"]
    assert var["valueFrom"]["secretKeyRef"]["key"] == "POSTGRES_URL"
    assert named("StatefulSet", "postgres")  # the default database the URL may point at


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_every_quartermaster_variable_is_a_setting(workload: dict[str, Any]) -> None:
    known = settings_names()
    for var in env_vars(workload):
        name = var["name"]
        if name in PROBE_VARIABLES or not name.startswith("QM_"):
            continue
        prefix = next((p for p in known if name.startswith(p)), None)
        assert prefix is not None, f"{name}: no service reads this prefix"
        field = name.removeprefix(prefix).lower()
        if field not in known[prefix] and field.endswith("_file"):
            field = field.removesuffix("_file")  # the setting read from that file (envsettings)
        assert field in known[prefix], f"{name} is not a setting"


def test_every_secret_the_manifests_need_is_documented() -> None:
    """Secrets are not shipped: deploy/README.md says how to create each one and each key."""
    readme = (DEPLOY / "README.md").read_text()
    needed = set()
    for workload in workloads():
        for var in env_vars(workload):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                needed |= {ref["name"], ref["key"]}
        for volume in pod(workload).get("volumes", []):
            if "secret" in volume:
                needed.add(volume["secret"]["secretName"])
            if "configMap" in volume and not named("ConfigMap", volume["configMap"]["name"]):
                needed.add(volume["configMap"]["name"])
    assert needed
    for name in sorted(needed):
        assert name in readme, f"deploy/README.md does not say how to create {name}"


def role_map_readers() -> list[tuple[dict[str, Any], str]]:
    """The workloads that read the role map, with the variable that names its file."""
    readers = [(w, "QM_ADMISSION_ROLES_FILE") for w in named("Deployment", "qm-admission")]
    agents = [d for d in named("DaemonSet") if "node-agent" in d["metadata"]["name"]]
    return readers + [(agent, "QM_NODE_ROLES_FILE") for agent in agents]


@pytest.mark.parametrize(
    ("workload", "variable"), role_map_readers(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_the_role_map_is_roles_json_of_the_object_store_secret(
    workload: dict[str, Any], variable: str
) -> None:
    """Admission (refuses unknown roles) and the agents (hand jobs the keys) read the same
    external store's map: key roles.json of Secret qm-object-store, mounted read-only."""
    path = Path(env_value(workload, variable))
    (container,) = containers(workload)
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(path.parent)]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod(workload)["volumes"] if v["name"] == mount["name"]]
    secret = volume["secret"]
    assert secret["secretName"] == "qm-object-store"
    keys = {item["path"]: item["key"] for item in secret.get("items", [])}
    assert keys.get(path.name, path.name) == "roles.json"
    # Readable by the pod's user through its group, and no one else.
    assert secret["defaultMode"] == 0o440
    assert pod(workload)["securityContext"]["fsGroup"] == 10001


def test_the_documented_role_map_is_one_the_services_read() -> None:
    from quartermaster.objectstore import RoleMap

    readme = (DEPLOY / "README.md").read_text()
    (example,) = re.findall(r"cat > roles\.json <<'EOF'\n(.*?)\nEOF\n", readme, re.S)
    roles = msgspec.json.decode(example, type=RoleMap)
    assert roles.default_access is not None


def test_admission_serves_the_aws_endpoint_with_the_bootstrap_keys(tmp_path: Path) -> None:
    """The AWS-compatible endpoint listens beside gRPC (port `aws`, all interfaces), the
    Service exposes it, and its keys dir is the mount of the Secret that carries the
    bootstrap's aws-keys.json and aws-keys.seal."""
    import datetime as dt

    from quartermaster.auth.access_keys import KEYS_FILE, SEAL_FILE
    from quartermaster.deploy.secrets import DeployPlan, ensure, part_files

    (admission,) = named("Deployment", "qm-admission")
    (container,) = containers(admission)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert str(ports["aws"]) == env_value(admission, "QM_ADMISSION_AWS_PORT")
    assert env_value(admission, "QM_ADMISSION_AWS_HOST") == "0.0.0.0"
    (service,) = named("Service", "qm-admission")
    exposed = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert exposed["aws"] == (ports["aws"], "aws")
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "secrets"]
    assert env_value(admission, "QM_ADMISSION_AWS_KEYS_DIR") == mount["mountPath"]
    (volume,) = [v for v in pod(admission)["volumes"] if v["name"] == "secrets"]
    assert volume["secret"]["secretName"] == "qm-bootstrap-admission"
    ensure(tmp_path, DeployPlan(hosts=()), dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    assert {KEYS_FILE, SEAL_FILE} <= set(part_files(tmp_path, "admission"))
