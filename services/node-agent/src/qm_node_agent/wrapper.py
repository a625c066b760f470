"""The process runtime's per-attempt wrapper: a POSIX shell script, not a Python process.

    /bin/sh -c SCRIPT qm-wrapper EXIT_FILE LOG_FILE MOUNTS WORK_DIR cmd [args...]

The agent starts the wrapper in a session of its own, so the job outlives an
agent restart and one signal to the process group reaches the job and its
children. The wrapper opens LOG_FILE itself (appending; "" keeps the output it
was given): a file's creation costs the agent's loop nothing then. One it cannot
open ends the attempt as the host's fault (`infrastructure_error`) before the
job runs. It traps SIGTERM/SIGINT/SIGHUP (a trap, not an ignore: the job starts
with the default handlers) and, since a shell runs a trap only once its
foreground command ended, always waits for the job and records its real
status: `{"exit_code": n, "start_error": ...}` in EXIT_FILE, in one write. The
agent reads it once the wrapper has ended, and takes a torn one for none.

The exit file is not flushed (no `sync` process per attempt): the agent saves
the outcome durably in the attempt's record as soon as the wrapper ends, and a
host crash in between (or while the agent is down) loses only how the attempt
ended: the restarted agent then fails it as lost (an infrastructure error,
retried by the job's retry strategy), never with a wrong status.

Why a shell: a Python wrapper costs 17 ms of CPU just to start its interpreter
on a loaded 2-core host (67 ms with argparse and subprocess), the shell about
1 ms. This module is imported by the agent only for `wrapper_argv`; it imports
the standard library alone.
"""

from __future__ import annotations

SHELL = "/bin/sh"
ARGV0 = "qm-wrapper"

# A log the wrapper cannot open: the host's fault, reported in the exit file.
LOG_ERROR = "cannot open the job's log file"
# Its /opt/ml or /etc/hosts cannot be mounted in its namespace: the host's fault too.
MOUNT_ERROR = "cannot mount the job's /opt/ml and /etc/hosts"
# Its work dir went between the agent's check and the start: the host's fault too.
WORK_DIR_ERROR = "cannot enter the job's work dir"

# 126/127 without a runnable command is a start error (the client's), not the job's code.
SCRIPT = r"""trap : TERM INT HUP
exit_file=$1
host_fault() {  # before the job runs: the attempt ends as the host's fault
  printf '{"exit_code": 1, "start_error": null, "infrastructure_error": "%s"}' "$1" \
    >"$exit_file"
  exit 1
}
if [ -n "$2" ]; then
  { true >>"$2"; } 2>/dev/null || host_fault "LOG_ERROR"
  exec >>"$2" 2>&1
fi
if [ -n "$3" ] && ! mount --fstab "$3" --all; then
  host_fault "MOUNT_ERROR"
fi
if [ -n "$4" ] && ! cd "$4"; then
  host_fault "WORK_DIR_ERROR"
fi
shift 4
"$@"
code=$?
start_error=null
if [ "$code" -eq 127 ] && ! command -v "$1" >/dev/null 2>&1; then
  start_error="command not found"
elif [ "$code" -eq 126 ] && { [ -d "$1" ] || ! [ -x "$1" ]; }; then
  start_error="command cannot be run"
fi
if [ "$start_error" != null ]; then
  name=$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/[\\"]/\\&/g')
  echo "qm-node-agent wrapper: $start_error: $1" >&2
  start_error="\"$start_error: $name\""
fi
printf '{"exit_code": %d, "start_error": %s}' "$code" "$start_error" >"$exit_file"
exit "$code"
"""
for _name, _text in (
    ("LOG_ERROR", LOG_ERROR),
    ("MOUNT_ERROR", MOUNT_ERROR),
    ("WORK_DIR_ERROR", WORK_DIR_ERROR),
):
    SCRIPT = SCRIPT.replace(_name, _text)


def wrapper_argv(
    exit_file: str,
    command: tuple[str, ...] | list[str],
    log_file: str = "",
    mounts: str = "",
    work_dir: str = "",
) -> list[str]:
    """The argv that runs `command` under the wrapper (the exit file is in it: see process.py).

    `work_dir`: where the job runs (the wrapper enters it: the agent starts the wrapper
    with `posix_spawn`, which has no working directory of its own to set).

    `mounts`: an fstab file (`bind_mounts`) whose bind mounts are made before the job
    starts, all by one `mount --fstab F --all`: one exec fewer than a `mount --bind`
    each (a job's start took 4.58 ms of CPU, now 3.57); the wrapper must then run in a
    mount namespace of its own (`unshare`)."""
    return [SHELL, "-c", SCRIPT, ARGV0, exit_file, log_file, mounts, work_dir, *command]


def bind_mounts(binds: list[tuple[str, str]]) -> str:
    """fstab lines binding each (source, target); a space, tab, newline or backslash
    in a path is written octal-escaped, as fstab(5) reads it."""
    return "".join(
        f"{_fstab_path(source)} {_fstab_path(target)} none bind 0 0\n" for source, target in binds
    )


def _fstab_path(path: str) -> str:
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in path)
