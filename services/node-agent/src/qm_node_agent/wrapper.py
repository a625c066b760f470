"""The process runtime's per-attempt wrapper: a POSIX shell script, not a Python process.

    /bin/sh -c SCRIPT qm-wrapper EXIT_FILE cmd [args...]

The agent starts the wrapper in a session of its own, so the job outlives an
agent restart and one signal to the process group reaches the job and its
children. The wrapper traps SIGTERM/SIGINT/SIGHUP (a trap, not an ignore: the
job starts with the default handlers) and, since a shell runs a trap only
once its foreground command ended, always waits for the job and records its
real status: `{"exit_code": n, "start_error": ...}` in EXIT_FILE, in one write,
fsynced. The restarted agent reads it there. It is written in place, not renamed
into place (one process fewer per attempt): the agent reads it once the wrapper
has ended, and takes a torn one (a crash in the middle of the write) for none.

Why a shell: a Python wrapper costs 17 ms of CPU just to start its interpreter
on a loaded 2-core host (67 ms with argparse and subprocess), the shell about
1 ms. This module is imported by the agent only for `wrapper_argv`; it imports
the standard library alone.
"""

from __future__ import annotations

SHELL = "/bin/sh"
ARGV0 = "qm-wrapper"

# 126/127 without a runnable command is a start error (the client's), not the job's code.
SCRIPT = r"""trap : TERM INT HUP
exit_file=$1
shift
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
sync "$exit_file"
exit "$code"
"""


def wrapper_argv(exit_file: str, command: tuple[str, ...] | list[str]) -> list[str]:
    """The argv that runs `command` under the wrapper (the exit file is in it: see process.py)."""
    return [SHELL, "-c", SCRIPT, ARGV0, exit_file, *command]
