"""`s3://bucket/key` URIs, checked as S3 names them (pure: no I/O)."""

from __future__ import annotations

import re

import msgspec

# S3's bucket naming rules (3-63 characters, lower case, digits, dots and hyphens;
# starts and ends with a letter or digit; not an IP address).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
MAX_KEY_BYTES = 1024


class S3Location(msgspec.Struct, frozen=True):
    bucket: str
    key: str  # "" for the bucket itself; a prefix may end with "/"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def child(self, name: str) -> S3Location:
        """The key `name` below this one, as a folder (one "/" between them)."""
        base = self.key if not self.key or self.key.endswith("/") else self.key + "/"
        return S3Location(self.bucket, base + name)


def parse_s3_uri(text: str) -> S3Location:
    """Raises ValueError saying what is wrong with `text`."""
    if not text.startswith("s3://"):
        raise ValueError(f"{text!r} is not an s3:// URI")
    rest = text[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not _BUCKET.match(bucket) or _IP.match(bucket) or ".." in bucket:
        raise ValueError(
            f"{text!r}: bucket {bucket!r} is not a valid S3 bucket name "
            "(3-63 characters: a-z, 0-9, '.', '-')"
        )
    if len(key.encode()) > MAX_KEY_BYTES:
        raise ValueError(f"{text!r}: the key is longer than {MAX_KEY_BYTES} bytes")
    if any(ord(char) < 32 or ord(char) == 127 for char in key):
        raise ValueError(f"{text!r}: the key holds a control character")
    return S3Location(bucket, key)
