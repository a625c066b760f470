"""Object storage through the S3 API: the one adapter every part that touches objects uses.

`uri` parses `s3://` URIs (pure), `access` holds the credentials an execution role
maps to (`roles.json`), `store` moves objects (obstore: 3x boto3's rate on many small
objects against the same SeaweedFS, see `bench/staging_bench.py`).
"""

from quartermaster.objectstore.access import RoleMap, S3Access
from quartermaster.objectstore.errors import (
    ObjectStoreError,
    StoreClientError,
    StoreUnavailable,
)
from quartermaster.objectstore.uri import S3Location, parse_s3_uri

__all__ = [
    "ObjectStoreError",
    "RoleMap",
    "S3Access",
    "S3Location",
    "StoreClientError",
    "StoreUnavailable",
    "parse_s3_uri",
]
