#!/usr/bin/env bash
# Make sure a local Docker engine is installed and answering `docker info`.
#
# Idempotent and fast when already set up (~0.1 s). Meant for CI (.ci/run) and
# developer machines, run as root on Debian 12. No image is ever pulled: test
# images are built locally by deploy/images/build-test-images.sh.
#
# The daemon runs without a bridge and without iptables rules; containers must
# use host networking (`--network host` / network_mode="host") and only talk
# to 127.0.0.1.
#
# Environment:
#   QM_DOCKERD_LOG      daemon log      (default /var/log/quartermaster-dockerd.log)
#   QM_DOCKERD_PIDFILE  daemon pidfile  (default /var/run/quartermaster-dockerd.pid)
#   QM_DOCKERD_WAIT_S   seconds to wait for `docker info` (default 60)
set -euo pipefail

log_file="${QM_DOCKERD_LOG:-/var/log/quartermaster-dockerd.log}"
pid_file="${QM_DOCKERD_PIDFILE:-/var/run/quartermaster-dockerd.pid}"
wait_s="${QM_DOCKERD_WAIT_S:-60}"

say() { echo "ensure-engine: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

engine_up() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }

# Fast path: engine already answering and busybox-static present.
if engine_up && [[ -x /bin/busybox ]] && dpkg -s busybox-static >/dev/null 2>&1; then
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (installs packages and starts dockerd)"

# Serialise concurrent callers (parallel CI steps, several shells).
exec 9>/var/lock/quartermaster-ensure-engine.lock
flock -w 120 9 || die "timed out waiting for /var/lock/quartermaster-ensure-engine.lock"

# 1. Packages. `dockerd` (not `docker`) decides: a standalone docker CLI may
#    already be on PATH without any engine.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
if ((${#missing[@]})); then
    say "installing ${missing[*]} ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
    command -v dockerd >/dev/null 2>&1 || die "dockerd not found after installing docker.io"
fi

# 2. Daemon. Another caller (or systemd) may have started it meanwhile.
dockerd_pid=""
if ! engine_up; then
    if [[ -s "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        say "dockerd (pid $(cat "$pid_file")) is running but not answering yet; waiting"
    else
        rm -f "$pid_file"
        mkdir -p "$(dirname "$log_file")"
        say "starting dockerd (log: $log_file)"
        # setsid + nohup: keep running after the calling shell/CI step exits.
        # 9>&-: the daemon must not inherit (and hold forever) the flock fd.
        setsid nohup dockerd \
            --bridge=none \
            --iptables=false \
            --pidfile="$pid_file" \
            >>"$log_file" 2>&1 </dev/null 9>&- &
        dockerd_pid=$!
    fi

    deadline=$((SECONDS + wait_s))
    until engine_up; do
        if ((SECONDS >= deadline)); then
            say "last lines of $log_file:"
            tail -n 30 "$log_file" >&2 || true
            die "docker engine did not answer 'docker info' within ${wait_s}s"
        fi
        # Daemon died early (bad flags, storage driver, cgroups ...): fail fast.
        if [[ -n "${dockerd_pid:-}" ]] && ! kill -0 "$dockerd_pid" 2>/dev/null; then
            say "last lines of $log_file:"
            tail -n 30 "$log_file" >&2 || true
            die "dockerd exited during startup"
        fi
        sleep 0.5
    done
    say "engine up after $((SECONDS))s ($(docker info -f '{{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))"
fi
exit 0
