"""Who is calling: principals and roles, signed bearer tokens, and a local PKI.

Needs the `auth` extra (PyJWT with cryptography). Admission verifies tokens
offline against a public key; `qm up` and `qm token issue` sign them.
"""

from quartermaster.auth.principal import Principal, Role, ShareRef
from quartermaster.auth.tokens import TokenError, issue_token, verify_token

__all__ = ["Principal", "Role", "ShareRef", "TokenError", "issue_token", "verify_token"]
