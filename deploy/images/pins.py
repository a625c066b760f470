"""Print `name==version` for every distribution an image installs, as the running venv has them.

    python deploy/images/pins.py qm-admission pip

build-images.sh hashes this output (with the sources) to decide whether an image is stale:
the dependency closure of the image's distributions, read from the venv's metadata, so a
tool installed into .venv for development does not rebuild every image.
"""

from __future__ import annotations

import sys
from importlib import metadata

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pragma: no cover - a venv without packaging still has pip's copy
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[assignment]


def closure(roots: list[str]) -> dict[str, str]:
    """Distribution name -> installed version, for `roots` and all they require."""
    pins: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(root) for root in roots]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        extras = frozenset(requirement.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pins[name] = "missing"
            continue
        pins[name] = dist.version
        for line in dist.requires or []:
            needed = Requirement(line)
            wanted = needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras | {""}
            )
            if wanted:
                todo.append(needed)
    return pins


if __name__ == "__main__":
    for name, version in sorted(closure(sys.argv[1:]).items()):
        print(f"{name}=={version}")
