"""Credentials for a store, and the execution roles that map to them (`roles.json`).

A job's `RoleArn` selects the credentials its containers receive, as an execution
role would on SageMaker. The map is a JSON file the operator writes (`qm up` writes
one mapping its default role to the embedded store):

    {"default_role": "arn:aws:iam::000000000000:role/quartermaster",
     "roles": {"arn:aws:iam::000000000000:role/quartermaster":
               {"endpoint_url": "http://127.0.0.1:8333", "access_key_id": "...",
                "secret_access_key": "...", "region": "us-east-1"}}}
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from quartermaster.files import write_whole

DEFAULT_REGION = "us-east-1"


class S3Access(msgspec.Struct, frozen=True, kw_only=True):
    endpoint_url: str = ""  # "": AWS S3 itself
    access_key_id: str = ""
    secret_access_key: str = ""
    region: str = DEFAULT_REGION
    session_token: str = ""

    def environment(self) -> dict[str, str]:
        """What a job's process or container receives (boto3, the AWS CLI and the
        SageMaker training toolkit read these)."""
        env = {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
        if self.endpoint_url:
            env["AWS_ENDPOINT_URL_S3"] = self.endpoint_url
            # The training toolkit passes this one to boto3 itself (boto3 before 1.28,
            # in older framework images, ignores AWS_ENDPOINT_URL_S3).
            env["S3_ENDPOINT_URL"] = self.endpoint_url
        if self.access_key_id:
            env["AWS_ACCESS_KEY_ID"] = self.access_key_id
            env["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key
        if self.session_token:
            env["AWS_SESSION_TOKEN"] = self.session_token
        return env


class RoleMap(msgspec.Struct, frozen=True, kw_only=True):
    roles: dict[str, S3Access] = msgspec.field(default_factory=dict)
    default_role: str = ""

    def access(self, role_arn: str) -> S3Access | None:
        return self.roles.get(role_arn)

    @property
    def default_access(self) -> S3Access | None:
        return self.roles.get(self.default_role)

    @classmethod
    def load(cls, path: str | Path) -> RoleMap:
        """Raises ValueError naming the file when it cannot be read as a role map."""
        try:
            return msgspec.json.decode(Path(path).read_bytes(), type=cls)
        except (OSError, msgspec.DecodeError) as err:
            raise ValueError(f"cannot read the role map {path}: {err}") from err

    def save(self, path: str | Path) -> None:
        """Written whole (a reader never sees half of it), readable by its owner only."""
        write_whole(path, msgspec.json.format(msgspec.json.encode(self)))
