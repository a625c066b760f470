#!/usr/bin/env bash
# Build the local test images (no registry access needed: FROM scratch +
# static busybox from Debian's busybox-static package).
#
#   deploy/images/build-test-images.sh            # build if missing or stale
#   deploy/images/build-test-images.sh --force    # always rebuild
#
# Requires a running engine (deploy/docker/ensure-engine.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${QM_JOB_RUNNER_IMAGE:-quartermaster/job-runner:test}"
force=0
[[ "${1:-}" == "--force" ]] && force=1

busybox=/bin/busybox
if ! file_out="$(file -L "$busybox" 2>/dev/null)" || [[ "$file_out" != *"statically linked"* ]]; then
    # `file` may be absent; fall back to checking the owning package.
    if ! dpkg -S "$busybox" 2>/dev/null | grep -q '^busybox-static:'; then
        echo "build-test-images: $busybox is not the static busybox; run: apt-get install -y busybox-static" >&2
        exit 1
    fi
fi

# Rebuild only when the Dockerfile or busybox changed (hash kept as a label).
want="$(cat "$here/job-runner/Dockerfile" "$busybox" | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{ index .Config.Labels "org.quartermaster.build-hash" }}' "$image" 2>/dev/null || true)"
if [[ $force -eq 0 && "$have" == "$want" ]]; then
    echo "build-test-images: $image up to date (use --force to rebuild)"
    exit 0
fi

ctx="$(mktemp -d)"
log="$(mktemp)"
trap 'rm -rf "$ctx" "$log"' EXIT
cp "$here/job-runner/Dockerfile" "$ctx/Dockerfile"
cp -L "$busybox" "$ctx/busybox"
chmod 0755 "$ctx/busybox"

start_ms=$(( $(date +%s%N) / 1000000 ))
# DOCKER_BUILDKIT=0: the classic builder ships with the engine; BuildKit/buildx
# is not installed by docker.io and FROM scratch needs nothing it offers.
DOCKER_BUILDKIT=0 docker build --network host -q \
    --label "org.quartermaster.build-hash=$want" -t "$image" "$ctx" >"$log" 2>&1 \
    || { cat "$log" >&2; echo "build-test-images: docker build failed" >&2; exit 1; }
end_ms=$(( $(date +%s%N) / 1000000 ))
echo "build-test-images: built $image in $(( end_ms - start_ms )) ms"
