"""Runs one job command for the process runtime and records how it ended.

    python -m qm_node_agent.wrapper --exit-file F -- cmd [args...]

The agent starts the wrapper in a session of its own, so the job outlives an
agent restart and one signal to the process group reaches the job and its
children. The wrapper survives SIGTERM/SIGINT itself (the job decides what to
do with them) and writes `{"exit_code": n, "start_error": ...}` to F
atomically when the job ends: the restarted agent reads it there. Standard
library only: it runs under the job's environment.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import subprocess
import sys
from types import FrameType


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qm_node_agent.wrapper")
    parser.add_argument("--exit-file", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    # A handler, not SIG_IGN: ignored signals would stay ignored in the job after exec.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _survive)
    try:
        child = subprocess.Popen(command)
    except OSError as err:
        code = 127 if err.errno in (errno.ENOENT, errno.ENOTDIR) else 126
        what = "command not found" if code == 127 else "command cannot be run"
        message = f"{what}: {command[0]} ({err.strerror})"
        print(f"qm-node-agent wrapper: {message}", file=sys.stderr, flush=True)
        _write_exit(args.exit_file, code, message)
        return code
    returncode = child.wait()
    code = returncode if returncode >= 0 else 128 - returncode
    _write_exit(args.exit_file, code, None)
    return code


def _survive(signum: int, frame: FrameType | None) -> None:
    """The signal went to the whole process group; the job handles it, the wrapper waits."""


def _write_exit(path: str, code: int, start_error: str | None) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"exit_code": code, "start_error": start_error}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
