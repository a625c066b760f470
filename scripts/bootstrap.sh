#!/usr/bin/env bash
# Install everything Quartermaster needs on a fresh Debian machine, idempotently:
# a virtualenv with the shared libs, every service and the one-machine stack (editable), and, as root,
# a local Docker engine, docker-compose, and the locally built test and deployment images
# (no registry pulls).
#
#   bash scripts/bootstrap.sh            # venv + docker engine + images
#   QM_SKIP_DOCKER=1 bash scripts/bootstrap.sh   # venv only
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$python" -m venv .venv
fi
stamp=.venv/.qm-installed
inputs=$(cat libs/*/pyproject.toml services/*/pyproject.toml | sha256sum | cut -c1-16)
if [[ ! -f $stamp || $(cat "$stamp") != "$inputs" ]]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q \
        -e "libs/quartermaster[dev]" \
        -e services/scheduler -e services/warmpool -e services/admission -e services/node-agent \
        -e libs/quartermaster-stack
    echo "$inputs" > "$stamp"
fi

if [[ -z ${QM_SKIP_DOCKER:-} ]]; then
    if [[ $(id -u) -eq 0 ]]; then
        bash deploy/docker/ensure-engine.sh
        bash deploy/images/build-test-images.sh
        # The deployment images (debootstrap makes their base) and docker-compose to run them.
        need=()
        command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
        command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
        command -v ip >/dev/null 2>&1 || need+=(iproute2)  # the multi-host test's namespaces
        # The local image registry the warm-start tests and bench pull from (started by them).
        command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
        if ((${#need[@]})); then
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
        fi
        bash deploy/images/build-images.sh
    else
        echo "bootstrap: not root, Docker engine not set up (docker tests will skip)" >&2
    fi
fi
