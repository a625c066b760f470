"""The containers of one stack on the host network: start, wait for, read, remove.

Plumbing under `quartermaster.testing.containers`, which knows what each part is.
Every container is labelled with its stack's id, so leftovers of a killed process
can be found (`docker ps --filter label=org.quartermaster.testing.stack`).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from docker.errors import NotFound
from testcontainers.core.container import DockerContainer
from testcontainers.core.docker_client import DockerClient

log = logging.getLogger("qm.testing.containers")

STACK_LABEL = "org.quartermaster.testing.stack"  # on every container: which stack started it
# Parts that restart when they exit with an error, as under compose or Kubernetes: one
# that loses a race in a fresh cluster's first seconds comes back.
RESTART_ON_FAILURE = {"Name": "on-failure", "MaximumRetryCount": 5}
ALIVE = ("created", "running", "restarting")
# The docker runtime's labels (qm_node_agent.runtime): on job containers and sandboxes,
# and on warm pool volumes.
JOB_LABEL = "org.quartermaster.job-id"
HOST_LABEL = "org.quartermaster.warm-host"

Volume = tuple[str, str, str]  # host path, container path, "ro" or "rw"


class StackStartError(RuntimeError):
    """A part of the stack did not come up; the message carries the tail of its log."""


def free_ports(count: int, offset: int = 0) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (held open together, then released);
    with `offset`, each port + `offset` is free as well (SeaweedFS serves gRPC there)."""
    held: list[socket.socket] = []
    found: list[int] = []
    try:
        while len(found) < count:
            held.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            held[-1].bind(("127.0.0.1", 0))
            port = int(held[-1].getsockname()[1])
            if offset:
                held.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                try:
                    held[-1].bind(("127.0.0.1", port + offset))
                except (OSError, OverflowError):  # taken, or past 65535: try another
                    continue
            found.append(port)
        return found
    finally:
        for s in held:
            s.close()


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return int(reply.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def container_logs(container: DockerContainer, tail: int = 40) -> str:
    wrapped = container.get_wrapped_container()
    if wrapped is None:
        return ""
    try:
        return str(wrapped.logs(tail=tail).decode(errors="replace"))
    except Exception as err:  # the engine's error, whatever the SDK raises
        return f"(no logs: {err})"


def numeric_user(user: str, image: str) -> tuple[int, int]:
    """uid and gid of an image's `USER uid[:gid]` (names cannot be resolved from outside)."""
    uid, _, gid = (user or "0").partition(":")
    if not uid.isdigit() or not (gid or uid).isdigit():
        raise StackStartError(f"{image} runs as user {user!r}: give it a numeric uid:gid")
    return int(uid), int(gid or uid)


def missing_images(images: Sequence[str]) -> list[str]:
    """Those of `images` the engine lacks (all of them when no engine answers)."""
    try:
        engine = DockerClient().client.images
    except Exception:  # docker.errors.DockerException: no engine here
        return list(images)
    missing = []
    for image in images:
        try:
            engine.get(image)
        except Exception:  # docker.errors.ImageNotFound, or the engine went away
            missing.append(image)
    return missing


class StackContainers:
    """The running containers of stack `stack_id`, by part name, in start order."""

    def __init__(self, stack_id: str, startup_timeout_s: float) -> None:
        self.stack_id = stack_id
        self.startup_timeout_s = startup_timeout_s
        self.deadline = time.monotonic() + startup_timeout_s
        self.by_name: dict[str, DockerContainer] = {}

    def run(
        self,
        name: str,
        image: str,
        env: Mapping[str, str],
        command: list[str] | None = None,
        volumes: Sequence[Volume] = (),
        group_add: Sequence[str] = (),
        restart: bool = False,
        entrypoint: str | None = None,
    ) -> DockerContainer:
        container = DockerContainer(image, env=dict(env), name=f"{self.stack_id}-{name}")
        if command is not None:
            container.with_command(command)
        for host_path, container_path, mode in volumes:
            container.with_volume_mapping(host_path, container_path, mode)
        container.with_kwargs(
            network_mode="host",
            network=None,  # testcontainers would attach its own network inside a container
            labels={STACK_LABEL: self.stack_id},
            group_add=list(group_add) or None,
            restart_policy=RESTART_ON_FAILURE if restart else None,
            entrypoint=entrypoint,
        )
        self.by_name[name] = container  # before start: a half-started one is removed too
        container.start()
        return container

    def run_once(self, name: str, image: str, env: Mapping[str, str], **options: Any) -> str:
        """Run a one-shot container to its end and remove it; its stdout, unless it exits
        with an error."""
        container = self.run(name, image, env, **options)
        wrapped = container.get_wrapped_container()
        remaining = max(1.0, self.deadline - time.monotonic())
        exit_code = int(wrapped.wait(timeout=remaining)["StatusCode"])
        if exit_code != 0:
            raise StackStartError(f"{name} exited ({exit_code}):\n{container_logs(container)}")
        stdout = str(wrapped.logs(stdout=True, stderr=False).decode())
        self.by_name.pop(name).stop()
        return stdout

    def wait(self, name: str, what: str, ready: Callable[[], bool]) -> None:
        """Poll `ready` until true; fail at once if the container exits, or at the deadline."""
        container = self.by_name[name]
        while not ready():
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status not in ALIVE:
                code = wrapped.attrs["State"].get("ExitCode")
                raise StackStartError(
                    f"{name} exited ({code}) before {what}:\n{container_logs(container)}"
                )
            if time.monotonic() > self.deadline:
                raise StackStartError(
                    f"{name}: not {what} within {self.startup_timeout_s:.0f} s:\n"
                    f"{container_logs(container)}"
                )
            time.sleep(0.2)

    def wait_log(self, name: str, text: str) -> None:
        self.wait(name, f"logged {text!r}", lambda: text in self.logs(name, 500))

    def exec_ok(self, name: str, command: list[str]) -> bool:
        try:
            return self.by_name[name].exec(command).exit_code == 0
        except Exception:  # docker.errors.APIError: the container is restarting
            return False

    def logs(self, name: str, tail: int = 200) -> str:
        return container_logs(self.by_name[name], tail)

    def restarts(self) -> dict[str, int]:
        counts = {}
        for name, container in self.by_name.items():
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            counts[name] = int(wrapped.attrs.get("RestartCount", 0))
        return counts

    def remove_all(self) -> None:
        """Remove every container, the last started first; an engine error is logged and
        the others are still removed."""
        for name in reversed(list(self.by_name)):
            container = self.by_name.pop(name)
            try:
                container.stop()
            except Exception as err:  # whatever the engine said, go on with the others
                log.warning("stack %s: cannot remove %s: %s", self.stack_id, name, err)

    def hand_over(self, image: str, directory: Path, files: Sequence[Path]) -> list[str]:
        """Copy `files` into a new `directory` that `image`'s non-root user can read; return
        the groups its container must join. As root the copies are chowned to that user;
        otherwise they are group-readable and the container joins this process's group."""
        directory.mkdir()
        copies = [directory / source.name for source in files]
        for source, copy in zip(files, copies, strict=True):
            shutil.copyfile(source, copy)
        if os.geteuid() == 0:
            attrs: dict[str, Any] = DockerClient().client.images.get(image).attrs
            uid, gid = numeric_user(str(attrs.get("Config", {}).get("User") or ""), image)
            for path in (directory, *copies):
                os.chown(path, uid, gid)
                path.chmod(0o700 if path.is_dir() else 0o400)
            return []
        directory.chmod(0o750)
        for copy in copies:
            copy.chmod(0o640)
        return [str(os.getgid())]


def remove_job_resources(under: Path, stack_id: str) -> None:
    """What the docker runtime's agents of one stack left on the engine: job containers
    and ready sandboxes (labelled `JOB_LABEL`) that mount a path under `under`, and warm
    pool volumes (labelled `HOST_LABEL`) whose folder lies under it. Agents leave jobs
    running when they stop (a restarted agent adopts them), so a stack's end must."""

    def ours(path: str) -> bool:
        return os.path.commonpath([path or "/", root]) == root

    root = os.path.abspath(under)
    try:
        engine = DockerClient().client
        jobs = engine.containers.list(all=True, sparse=True, filters={"label": JOB_LABEL})
        volumes = engine.volumes.list(filters={"label": HOST_LABEL})
    except Exception as err:  # cleanup goes on; the engine's error is only reported
        log.warning("stack %s: cannot list job containers and volumes: %s", stack_id, err)
        return
    for job in jobs:
        try:
            job.reload()  # a sparse listing has no mounts
            if any(ours(m.get("Source", "")) for m in job.attrs.get("Mounts", [])):
                job.remove(force=True)
        except NotFound:  # removed meanwhile (another stack's cleanup, its agent)
            continue
        except Exception as err:
            log.warning("stack %s: cannot remove container %s: %s", stack_id, job.id, err)
    for volume in volumes:
        try:
            if ours((volume.attrs.get("Options") or {}).get("device", "")):
                volume.remove(force=True)
        except NotFound:
            continue
        except Exception as err:
            log.warning("stack %s: cannot remove volume %s: %s", stack_id, volume.name, err)
