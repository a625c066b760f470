"""The execution roles a submission may name: the keys of the stack's role map.

`Settings.roles_file` names the map (`quartermaster.objectstore.RoleMap`, the file
node agents read credentials from). It is read when the server starts (a file that
cannot be read stops the start) and read again when it changes (`files.stamp_of`),
so an operator who adds a role needs no restart. A rewrite that cannot be read keeps
the roles last read, with a warning: submissions keep being checked.
"""

from __future__ import annotations

import logging

from qm_admission.settings import SettingsError
from quartermaster.files import stamp_of
from quartermaster.objectstore import RoleMap

log = logging.getLogger(__name__)


class RoleFile:
    def __init__(self, path: str) -> None:
        self._path = path
        self._stamp = stamp_of(path)
        try:
            self._roles = _role_names(RoleMap.load(path))
        except ValueError as err:
            raise SettingsError(f"QM_ADMISSION_ROLES_FILE: {err}") from err

    def known(self) -> frozenset[str]:
        """The role ARNs of the map as it is now (a `stat` per call, a read per change)."""
        stamp = stamp_of(self._path)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._roles = _role_names(RoleMap.load(self._path))
            except ValueError as err:
                log.warning("roles file changed but cannot be read, keeping its roles: %s", err)
        return self._roles


def _role_names(roles: RoleMap) -> frozenset[str]:
    return frozenset(roles.roles)


def known_roles(roles: RoleFile | None) -> frozenset[str] | None:
    """What validation checks RoleArn against: None (no roles file) checks nothing."""
    return None if roles is None else roles.known()
