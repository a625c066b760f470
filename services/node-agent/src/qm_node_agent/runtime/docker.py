"""The docker runtime: one container per attempt, driven through the docker CLI.

A cold start does what a real host does before a training job runs, each phase
timed: pull the image from the host's registry (`registry` setting; none: the
image must be in the engine, a missing one is the client's error), create the
chain's volume, stage the input channels, create the container and start it.
A warm pool keeps all of it (sandbox.py): the image, the volume with its cache,
the staged inputs when the channels are the same, and a ready sandbox created
once the previous job ended, so the next matching job is a rename and a start.

Containers run `--network host --init` with tini signalling the whole process
group, so `docker stop -t <grace>` reaches every process of the job. A container
outlives the agent; a restarted agent finds it by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import shutil
import time
import weakref
from pathlib import Path

from qm_node_agent.contract.stage import prepare
from qm_node_agent.errors import LaunchError, RuntimeFailure
from qm_node_agent.launch import ML_DIR, LaunchSpec
from qm_node_agent.layout import CONTAINER_CACHE_DIR, safe_name
from qm_node_agent.records import AttemptRecord
from qm_node_agent.runtime.base import ExitStatus, tail
from qm_node_agent.runtime.docker_logs import LogCopier
from qm_node_agent.runtime.sandbox import (
    CHAIN_LABEL,
    CONTROL_DIR,
    HOST_LABEL,
    JOB_SCRIPT,
    SANDBOX_PREFIX,
    SIZE_LABEL,
    ChainFiles,
    image_ref,
    write_job_script,
)
from qm_node_agent.settings import RuntimeKind
from quartermaster.events import StartPhases

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 50
_TINI_EXEC_FAILED = re.compile(r"\[FATAL (?:tini \(\d+\)|qm-sandbox)\] (exec .* failed: .*)")
JOB_LABEL = "org.quartermaster.job-id"
PULL_TIMEOUT_S = 1800.0
SANDBOX_DUE_TIMEOUT_S = 30.0  # how long a launch waits for its chain's sandbox to be made
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
    def __init__(
        self,
        runtime: DockerRuntime,
        name: str,
        *,
        spec: LaunchSpec | None = None,
        image: str = "",
        start_phases: StartPhases | None = None,
        logs: LogCopier | None = None,
    ) -> None:
        self._runtime = runtime
        self._docker = runtime.docker
        self.name = name
        self._log_copy = logs  # the container's output into the attempt's live log file
        self._spec = spec  # None when adopted: its container is removed, no sandbox follows
        self._image = image
        self.start_phases = start_phases

    @property
    def pid(self) -> int | None:
        return None

    async def wait(self) -> ExitStatus:
        try:
            result = await self._docker("wait", self.name, timeout_s=None)
        except BaseException:  # the agent stops: a restarted one copies the logs anew
            if self._log_copy is not None:
                await self._log_copy.stop()
            raise
        if self._spec is not None and self._spec.keep_warm:
            self._runtime.sandbox_follows(self._spec.chain_id)
        if self._log_copy is not None:
            await self._log_copy.finish()
        if result.returncode != 0:
            if result.missing():
                raise RuntimeFailure(f"container {self.name} vanished")
            raise RuntimeFailure(f"docker wait {self.name} failed: {result.message}")
        try:
            code = int(result.out.strip().splitlines()[-1])
        except (ValueError, IndexError) as err:
            raise RuntimeFailure(f"docker wait {self.name} said {result.out!r}") from err
        start_error = None
        if code in (126, 127):  # the command could not be exec'd: the request is wrong
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
        """Remove the container; a job that may leave a warm pool leaves a ready sandbox."""
        try:
            if self._log_copy is not None:
                await self._log_copy.stop()
            await self._runtime.remove_container(self.name)
            if self._spec is not None and self._spec.keep_warm:
                await self._runtime.prepare_sandbox(self._spec, self._image)
        finally:
            if self._spec is not None:
                self._runtime.sandbox_made(self._spec.chain_id)


PING_TIMEOUT_S = 1.5  # inside the health check's own limit


class DockerRuntime:
    kind = RuntimeKind.DOCKER.value

    async def ping(self) -> str:
        """The engine answers (`docker version` reaches the daemon: its /_ping and
        /version), with the server's version."""
        result = await self.docker(
            "version", "--format", "{{.Server.Version}}", timeout_s=PING_TIMEOUT_S
        )
        if result.returncode != 0:
            raise RuntimeFailure(f"docker engine: {result.message}")
        return f"docker engine {result.out.strip()}"

    def __init__(
        self,
        binary: str = "docker",
        *,
        data_dir: Path | None = None,
        registry: str = "",
        host_id: str = "",
    ) -> None:
        self.docker = DockerCli(binary)
        self._registry = registry
        self._host_id = host_id
        self._warm_root = (data_dir or Path(".")) / "warm"
        # One lock per chain folder (`safe_name`): a launch, a sandbox's making and a
        # release of the same folder never overlap. Held weakly: a lock lives while a
        # task holds or awaits it, so an agent that sees many chains keeps no lock each.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Folders (`safe_name`) of the chains the agent keeps (None: not yet told).
        self._kept: set[str] | None = None
        self._releasing = asyncio.Lock()  # one release at a time, each by the newest keep
        # Chains whose job has exited but whose ready sandbox is not made yet.
        self._sandbox_due: dict[str, asyncio.Event] = {}

    def sandbox_follows(self, chain_id: str) -> None:
        """A keep-warm job exited: its sandbox comes once the container is removed.

        Marked before the exit is reported, so a warm reuse (which the log can
        only dispatch after that report) waits for the sandbox instead of
        racing its making and starting cold.
        """
        self._sandbox_due.setdefault(chain_id, asyncio.Event())

    def sandbox_made(self, chain_id: str) -> None:
        due = self._sandbox_due.pop(chain_id, None)
        if due is not None:
            due.set()

    async def launch(self, spec: LaunchSpec, record: AttemptRecord) -> DockerJob:
        if not spec.image:
            raise LaunchError.client("AlgorithmSpecification.TrainingImage is missing")
        due = self._sandbox_due.get(spec.chain_id)
        if due is not None:  # bounded: a removal that never ends must not block the chain
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(due.wait(), SANDBOX_DUE_TIMEOUT_S)
        async with self._lock(spec.chain_id):
            return await self._launch(spec, record)

    async def _launch(self, spec: LaunchSpec, record: AttemptRecord) -> DockerJob:
        files = self._files(spec.chain_id)
        image = image_ref(self._registry, spec.image)
        name = record.container
        sandbox_image = await self._sandbox_image(files.sandbox)
        warm = sandbox_image == image
        if sandbox_image is not None and not warm:  # the pool kept another image
            await self.remove_container(files.sandbox)
        # The folder first: it marks the chain as this agent's, so a release frees the
        # volume made next even if the agent stops before the job starts.
        await asyncio.to_thread(files.create)
        t0 = time.perf_counter()
        if not warm:
            await self._pull(image)
        t1 = time.perf_counter()
        if not warm:
            await self._ensure_volume(spec, files)
        t2 = time.perf_counter()
        staged = await asyncio.to_thread(
            prepare,
            spec.contract,
            spec.access,
            addresses=spec.addresses,
            network_interface=spec.network_interface,
        )
        t3 = time.perf_counter()
        command = list(spec.command)
        if not spec.entrypoint:  # the image's ENTRYPOINT, the job's arguments or its CMD
            command = await self._image_command(image, spec.arguments)
        await asyncio.to_thread(write_job_script, files, spec, command, CONTAINER_CACHE_DIR)
        if warm:
            made = await self._call("rename", files.sandbox, name)
        else:
            made = await self._create(spec, files, image, name, labels=_job_labels(spec))
        if made.returncode != 0 and _in_use(made):  # launched before a restart
            log.info("container %s exists already (launched before a restart): adopting", name)
            return DockerJob(self, name, spec=spec, image=image, logs=await self._copy(record))
        if made.returncode != 0:
            raise LaunchError.infrastructure(f"docker rename failed: {made.message}")
        result = await self._call("start", name)
        if result.returncode != 0:
            await self.remove_container(name)
            raise LaunchError.infrastructure(f"docker start failed: {result.message}")
        t4 = time.perf_counter()
        phases = StartPhases(
            pull_s=0.0 if warm else t1 - t0,
            volume_s=0.0 if warm else t2 - t1,
            staging_s=(t3 - t2) if staged.channels else 0.0,
            container_s=t4 - t3,
            warm=warm,
        )
        log.info("container %s started %s: %s", name, "warm" if warm else "cold", phases)
        logs = await self._copy(record)
        return DockerJob(self, name, spec=spec, image=image, start_phases=phases, logs=logs)

    async def _pull(self, image: str) -> None:
        if not self._registry:  # nothing to pull from: the engine must have it
            await self._check_image(image)
            return
        result = await self._call("pull", "--quiet", image, timeout_s=PULL_TIMEOUT_S)
        if result.returncode == 0:
            return
        text = result.err.lower()
        if "not found" in text or "manifest unknown" in text or "does not exist" in text:
            raise LaunchError.client(f"image not found in {self._registry}: {image}")
        raise LaunchError.infrastructure(f"docker pull {image} failed: {result.message}")

    async def _check_image(self, image: str) -> None:
        result = await self._call("image", "inspect", "--format", "{{.Id}}", image)
        if result.returncode == 0:
            return
        if "no such image" in result.err.lower():
            raise LaunchError.client(f"image not found: {image}")
        raise LaunchError.infrastructure(f"docker image inspect failed: {result.message}")

    async def _ensure_volume(self, spec: LaunchSpec, files: ChainFiles) -> None:
        """The chain's volume: a docker volume over its persistent cache folder."""
        inspect = await self._call("volume", "inspect", "--format", "{{.Name}}", files.volume)
        if inspect.returncode == 0:
            return
        await asyncio.to_thread(spec.cache_dir.mkdir, parents=True, exist_ok=True)
        await self._checked(
            "volume",
            "create",
            *(arg for label in files.labels for arg in ("--label", label)),
            "--label",
            f"{SIZE_LABEL}={spec.volume_size_gb}",
            "--opt",
            "type=none",
            "--opt",
            "o=bind",
            "--opt",
            f"device={spec.cache_dir}",
            files.volume,
        )

    async def _image_command(self, image: str, arguments: tuple[str, ...]) -> list[str]:
        """The image's ENTRYPOINT, then the job's arguments or else the image's CMD."""
        fmt = "{{json .Config.Entrypoint}}\t{{json .Config.Cmd}}"
        result = await self._checked("image", "inspect", "--format", fmt, image)
        entrypoint, cmd = (json.loads(part) or [] for part in result.out.strip().split("\t"))
        command = [*entrypoint, *(arguments or cmd)]
        if not command:
            raise LaunchError.client(f"{image} has no ENTRYPOINT or CMD and the job names none")
        return command

    async def _create(
        self,
        spec: LaunchSpec,
        files: ChainFiles,
        image: str,
        name: str,
        labels: list[str],
    ) -> DockerResult:
        """Create the container; an answer that the name is taken is returned, not raised."""
        result = await self._call("create", *create_args(spec, files, image, name, labels))
        if result.returncode == 0 or _in_use(result):
            return result
        await self.remove_container(name)  # a failed create may leave it half made
        if "no such image" in result.err.lower():
            raise LaunchError.client(result.message)
        raise LaunchError.infrastructure(f"docker create failed: {result.message}")

    async def prepare_sandbox(self, spec: LaunchSpec, image: str) -> None:
        """Create the chain's next container now, while its pool waits for a matching job."""
        files = self._files(spec.chain_id)
        async with self._lock(spec.chain_id):
            if not self._keeps(safe_name(spec.chain_id)):
                return  # the pool ended already
            if await self._state_of(files.sandbox) is not None:
                return
            try:
                await self._create(spec, files, image, files.sandbox, labels=[f"{JOB_LABEL}="])
            except LaunchError as err:
                log.warning("no ready sandbox for chain %s: %s", spec.chain_id, err.reason)

    async def release(self, keep: set[str]) -> None:
        """Free the sandbox, volume and staged inputs of every chain not in `keep`.

        Only this agent's chains: those with a folder in its data dir. The engine's
        labels name the host, and two deployments on one engine can have the same
        host ids (two `qm up` on one machine, two test stacks), so a label alone
        would free the other's warm pools. The agent calls this as a task on every
        change of what it keeps, so calls overlap: they run one at a time, and each
        chain and folder is checked against the newest `keep`, under its lock, just
        before it is freed (an older call must not free what a newer one keeps, nor
        a folder a launch is filling)."""
        self._kept = {safe_name(chain) for chain in keep}
        async with self._releasing:
            await self._free_unkept()

    async def _free_unkept(self) -> None:
        listed = await self.docker(
            "ps",
            "-a",
            "--filter",
            f"label={HOST_LABEL}={self._host_id}",
            "--format",
            f'{{{{.Names}}}}\t{{{{.Label "{CHAIN_LABEL}"}}}}',
        )
        volumes = await self.docker(
            "volume",
            "ls",
            "--filter",
            f"label={HOST_LABEL}={self._host_id}",
            "--format",
            f'{{{{.Name}}}}\t{{{{.Label "{CHAIN_LABEL}"}}}}',
        )
        sandboxes = _named_chains(listed.out if listed.returncode == 0 else "")
        chains = set(sandboxes.values()) | set(_named_chains(volumes.out).values())
        if self._warm_root.exists():
            on_disk = {path.name for path in self._warm_root.iterdir()}
        else:
            on_disk = set()
        listed_folders = {safe_name(chain) for chain in chains}
        # Kept chains are skipped before their lock too: a launch holds it through a
        # cold pull, and releases wait for each other.
        for chain in sorted(c for c in chains if safe_name(c) in on_disk):
            if self._keeps(safe_name(chain)):
                continue
            async with self._lock(chain):
                if self._keeps(safe_name(chain)):
                    continue
                files = self._files(chain)
                log.info("freeing warm pool chain %s (sandbox, volume, inputs)", chain)
                for name, of in sandboxes.items():
                    if of == chain and name.startswith(SANDBOX_PREFIX):
                        await self.remove_container(name)
                await self.docker("volume", "rm", "-f", files.volume)
                await asyncio.to_thread(shutil.rmtree, files.dir, True)
        # Folders no engine resource named when listed. A listed chain's folder is left
        # to the chain's own step: one kept there and let go since keeps its folder
        # until a newer release frees the chain whole (without its folder, no release
        # would free its sandbox and volume).
        for folder in sorted(on_disk - listed_folders):
            if self._keeps(folder):
                continue
            async with self._folder_lock(folder):
                if not self._keeps(folder):
                    await asyncio.to_thread(shutil.rmtree, self._warm_root / folder, True)

    def _keeps(self, folder: str) -> bool:
        return self._kept is None or folder in self._kept

    def _lock(self, chain_id: str) -> asyncio.Lock:
        return self._folder_lock(safe_name(chain_id))

    def _folder_lock(self, folder: str) -> asyncio.Lock:
        lock = self._locks.get(folder)
        if lock is None:
            lock = self._locks[folder] = asyncio.Lock()
        return lock

    def _files(self, chain_id: str) -> ChainFiles:
        return ChainFiles(self._warm_root, chain_id, self._host_id)

    async def remove_container(self, name: str) -> None:
        result = await self.docker("rm", "-f", name)
        if result.returncode != 0 and not result.missing():
            log.warning("docker rm %s failed: %s", name, result.message)

    async def _state_of(self, name: str) -> str | None:
        result = await self._call("inspect", "--format", "{{.State.Status}}", name)
        return result.out.strip() if result.returncode == 0 else None

    async def _sandbox_image(self, name: str) -> str | None:
        """The image a ready (created, never started) sandbox was made from; None: none."""
        fmt = "{{.State.Status}}\t{{.Config.Image}}"
        result = await self._call("inspect", "--format", fmt, name)
        if result.returncode != 0:
            return None
        status, _, image = result.out.strip().partition("\t")
        if status != "created":
            await self.remove_container(name)
            return None
        return image

    async def _call(self, *args: str, timeout_s: float = 60.0) -> DockerResult:
        try:
            return await self.docker(*args, timeout_s=timeout_s)
        except RuntimeFailure as err:
            raise LaunchError.infrastructure(str(err)) from err

    async def _checked(self, *args: str) -> DockerResult:
        result = await self._call(*args)
        if result.returncode != 0:
            raise LaunchError.infrastructure(f"docker {args[0]} failed: {result.message}")
        return result

    async def adopt(self, record: AttemptRecord) -> DockerJob | None:
        name = record.container
        result = await self.docker("inspect", "--format", "{{.State.Status}}", name)
        if result.returncode != 0:
            if result.missing():
                return None
            raise RuntimeFailure(f"docker inspect {name} failed: {result.message}")
        if result.out.strip() == "created":  # created, never started: the agent died in between
            started = await self.docker("start", name)
            if started.returncode != 0:
                log.warning("cannot start leftover container %s: %s", name, started.message)
                await self.docker("rm", "-f", name)
                return None
        return DockerJob(self, name, logs=await self._copy(record))

    async def _copy(self, record: AttemptRecord) -> LogCopier:
        return await LogCopier(self.docker.binary, record.container, Path(record.log_file)).start()

    async def forget(self, record: AttemptRecord) -> None:
        await self.remove_container(record.container)


def _in_use(result: DockerResult) -> bool:
    text = result.err.lower()
    return "is already in use" in text or "conflict" in text


def _job_labels(spec: LaunchSpec) -> list[str]:
    return [f"{JOB_LABEL}={spec.job_id}", f"org.quartermaster.attempt={spec.attempt}"]


def _named_chains(listing: str) -> dict[str, str]:
    pairs = (line.split("\t", 1) for line in listing.splitlines() if "\t" in line)
    return {name: chain for name, chain in pairs if chain}


def create_args(
    spec: LaunchSpec, files: ChainFiles, image: str, name: str, labels: list[str]
) -> list[str]:
    """Arguments of `docker create`: every mount of the chain, the job script as entrypoint.

    The job's environment and command are in job.sh, written just before the
    start, so a sandbox made before its job is known can run it.
    """
    args = [
        "--name",
        name,
        "--pull",
        "never",
        "--network",
        "host",
        "--init",
        "-e",
        "TINI_KILL_PROCESS_GROUP=1",
    ]
    for label in [*files.labels, *labels]:
        args += ["--label", label]
    args += ["--mount", f"type=volume,src={files.volume},dst={CONTAINER_CACHE_DIR}"]
    # The contract's tree (config, channels, model, output) at /opt/ml, the gang's
    # algo-i names in /etc/hosts; the cache and control mounts lie inside it.
    args += ["-v", f"{spec.contract.outputs.ml_dir}:{ML_DIR}"]
    args += ["-v", f"{spec.contract.hosts_file}:/etc/hosts:ro"]
    args += ["-v", f"{files.control}:{CONTROL_DIR}:ro"]
    if spec.gpu_indexes:
        devices = ",".join(str(index) for index in spec.gpu_indexes)
        args += ["--gpus", f'"device={devices}"']
    return [*args, "--entrypoint", "/bin/sh", image, f"{CONTROL_DIR}/{JOB_SCRIPT}"]
