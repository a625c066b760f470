"""The docker runtime: one detached container per attempt, driven through the docker CLI.

`docker run -d --name qm-<job>-<attempt> --network host --init` with tini
signalling the whole process group, so `docker stop -t <grace>` reaches every
process of the job. The container outlives the agent; a restarted agent finds
it by name. Images are never pulled: a missing image is the client's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re

from qm_node_agent.errors import LaunchError, RuntimeFailure
from qm_node_agent.launch import LaunchSpec
from qm_node_agent.layout import CONTAINER_CACHE_DIR
from qm_node_agent.records import AttemptRecord
from qm_node_agent.runtime.base import ExitStatus, tail
from qm_node_agent.settings import RuntimeKind

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 50
_TINI_EXEC_FAILED = re.compile(r"\[FATAL tini \(\d+\)\] (exec .* failed: .*)")
_NO_SUCH = ("no such container", "no such object")


class DockerResult:
    def __init__(self, returncode: int, out: str, err: str) -> None:
        self.returncode = returncode
        self.out = out
        self.err = err

    @property
    def message(self) -> str:
        return (self.err.strip() or self.out.strip()).removeprefix("docker: ")

    def missing(self) -> bool:
        text = self.err.lower()
        return any(phrase in text for phrase in _NO_SUCH)


class DockerCli:
    def __init__(self, binary: str = "docker") -> None:
        self.binary = binary

    async def __call__(self, *args: str, timeout_s: float | None = 60.0) -> DockerResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                self.binary,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as err:
            raise RuntimeFailure(f"cannot run {self.binary}: {err}") from err
        try:
            out, err_out = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError as err:
            await _kill(proc)
            raise RuntimeFailure(f"docker {args[0]} did not answer within {timeout_s}s") from err
        except BaseException:  # cancelled (the agent stops): the container itself runs on
            await _kill(proc)
            raise
        assert proc.returncode is not None
        return DockerResult(
            proc.returncode, out.decode(errors="replace"), err_out.decode(errors="replace")
        )


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


class DockerJob:
    def __init__(self, docker: DockerCli, name: str) -> None:
        self._docker = docker
        self.name = name

    @property
    def pid(self) -> int | None:
        return None

    async def wait(self) -> ExitStatus:
        result = await self._docker("wait", self.name, timeout_s=None)
        if result.returncode != 0:
            if result.missing():
                raise RuntimeFailure(f"container {self.name} vanished")
            raise RuntimeFailure(f"docker wait {self.name} failed: {result.message}")
        try:
            code = int(result.out.strip().splitlines()[-1])
        except (ValueError, IndexError) as err:
            raise RuntimeFailure(f"docker wait {self.name} said {result.out!r}") from err
        start_error = None
        if code in (126, 127):  # tini could not exec the command: the request is wrong
            match = _TINI_EXEC_FAILED.search(await self._logs(20))
            if match:
                start_error = match.group(1)
        return ExitStatus(code, start_error)

    async def stop(self, grace_s: float) -> None:
        grace = max(0, math.ceil(grace_s))
        result = await self._docker("stop", "-t", str(grace), self.name, timeout_s=grace + 60)
        if result.returncode != 0 and not result.missing():
            log.warning("docker stop %s failed: %s", self.name, result.message)
            await self._docker("kill", self.name)

    async def log_tail(self) -> str:
        return tail((await self._logs(LOG_TAIL_LINES)).encode())

    async def _logs(self, lines: int) -> str:
        try:
            result = await self._docker("logs", "--tail", str(lines), self.name)
        except RuntimeFailure:
            return ""
        # The CLI writes the job's stdout and stderr to its own two streams.
        return result.out + result.err if result.returncode == 0 else ""

    async def remove(self) -> None:
        result = await self._docker("rm", "-f", self.name)
        if result.returncode != 0 and not result.missing():
            log.warning("docker rm %s failed: %s", self.name, result.message)


class DockerRuntime:
    kind = RuntimeKind.DOCKER.value

    def __init__(self, binary: str = "docker") -> None:
        self._docker = DockerCli(binary)

    async def launch(self, spec: LaunchSpec, record: AttemptRecord) -> DockerJob:
        if not spec.image:
            raise LaunchError.client("AlgorithmSpecification.TrainingImage is missing")
        await self._check_image(spec.image)
        spec.cache_dir.mkdir(parents=True, exist_ok=True)
        name = record.container
        result = await self._call("run", *run_args(spec, name))
        if result.returncode == 0:
            return DockerJob(self._docker, name)
        if "is already in use by container" in result.err:
            log.info("container %s exists already (launched before a restart): adopting", name)
            return DockerJob(self._docker, name)
        await self._call("rm", "-f", name)  # a failed start leaves the created container
        if result.returncode in (126, 127) or "no such image" in result.err.lower():
            raise LaunchError.client(result.message)
        raise LaunchError.infrastructure(f"docker run failed: {result.message}")

    async def _check_image(self, image: str) -> None:
        result = await self._call("image", "inspect", "--format", "{{.Id}}", image)
        if result.returncode == 0:
            return
        if "no such image" in result.err.lower():
            raise LaunchError.client(f"image not found: {image}")
        raise LaunchError.infrastructure(f"docker image inspect failed: {result.message}")

    async def _call(self, *args: str) -> DockerResult:
        try:
            return await self._docker(*args)
        except RuntimeFailure as err:
            raise LaunchError.infrastructure(str(err)) from err

    async def adopt(self, record: AttemptRecord) -> DockerJob | None:
        name = record.container
        result = await self._docker("inspect", "--format", "{{.State.Status}}", name)
        if result.returncode != 0:
            if result.missing():
                return None
            raise RuntimeFailure(f"docker inspect {name} failed: {result.message}")
        if result.out.strip() == "created":  # created, never started: the agent died in between
            started = await self._docker("start", name)
            if started.returncode != 0:
                log.warning("cannot start leftover container %s: %s", name, started.message)
                await self._docker("rm", "-f", name)
                return None
        return DockerJob(self._docker, name)

    async def forget(self, record: AttemptRecord) -> None:
        await DockerJob(self._docker, record.container).remove()


def run_args(spec: LaunchSpec, name: str) -> list[str]:
    """Arguments of `docker run` for one attempt (the image is never pulled)."""
    args = [
        "-d",
        "--name",
        name,
        "--pull",
        "never",
        "--network",
        "host",
        "--init",
        "-e",
        "TINI_KILL_PROCESS_GROUP=1",
        "--label",
        f"org.quartermaster.job-id={spec.job_id}",
        "--label",
        f"org.quartermaster.attempt={spec.attempt}",
    ]
    for key, value in spec.environment_with_cache(CONTAINER_CACHE_DIR).items():
        args += ["-e", f"{key}={value}"]
    args += ["-v", f"{spec.cache_dir}:{CONTAINER_CACHE_DIR}"]
    if spec.gpu_indexes:
        devices = ",".join(str(index) for index in spec.gpu_indexes)
        args += ["--gpus", f'"device={devices}"']
    command = list(spec.command)
    if spec.entrypoint:
        args += ["--entrypoint", command.pop(0)]
    return [*args, spec.image, *command]
