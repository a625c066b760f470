"""Settings of the admission service: one frozen struct, read once from the environment.

Every variable is `QM_ADMISSION_<FIELD>` (upper case); nothing else reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping

from qm_admission.errors import PermanentAdmissionError
from quartermaster.bus.access import BusSettings
from quartermaster.envsettings import SettingsError as EnvSettingsError
from quartermaster.envsettings import from_env

PREFIX = "QM_ADMISSION_"


class SettingsError(PermanentAdmissionError):
    """An environment variable has a value of the wrong type."""


class Settings(BusSettings, frozen=True, kw_only=True):
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 0  # 0: any free port (logged at start)
    # Security. `qm-admission` refuses to start without a token key and a TLS certificate
    # unless `insecure` is set (a plaintext development stack where everyone is admin).
    token_public_key_file: str = ""  # Ed25519 public key (PEM) that bearer tokens verify against
    tls_cert_file: str = ""  # server certificate chain (PEM)
    tls_key_file: str = ""
    tls_client_ca_file: str = ""  # set: mutual TLS, clients need a certificate this CA signed
    insecure: bool = False
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/quartermaster"
    pg_schema: str = "qm"
    max_keep_alive_seconds: int = 3600
    # Refuse jobs without ContainerEntrypoint (hosts that run processes; `qm up` sets it).
    require_command: bool = False
    # The execution roles jobs may name (`quartermaster.objectstore.RoleMap`, JSON): set, a
    # RoleArn not in it is refused at submit. "": any role (no object store configured).
    roles_file: str = ""
    read_timeout_seconds: float = 10.0
    shutdown_grace_seconds: float = 5.0
    # Group commit under load: how long the next append may wait for more submits while
    # they keep coming (`group_commit`; 0: never). A lone call never waits.
    submit_linger_seconds: float = 0.010
    page_token_secret: str = ""  # HMAC key of page tokens; "" = random, this process only
    # The AWS-compatible endpoint (`qm_admission.aws`): Batch, SageMaker, IAM and STS over
    # HTTP(S) with SigV4. -1: off; 0: any free port. TLS as for gRPC.
    aws_port: int = -1
    aws_host: str = "127.0.0.1"
    # The access keys SigV4 requests are signed with (`aws-keys.json` and `aws-keys.seal`,
    # written by `qm keys issue`). Required with aws_port unless insecure.
    aws_keys_dir: str = ""
    metrics_port: int = 0  # serve /metrics, /livez and /readyz here (0: off)
    metrics_host: str = "127.0.0.1"
    ready_max_lag_seconds: float = 10.0  # /readyz: the fold at most this far behind the log

    def security_problem(self) -> str | None:
        """Why this configuration must not serve, or None."""
        if self.insecure:
            return None
        missing = [
            PREFIX + name.upper()
            for name in ("token_public_key_file", "tls_cert_file", "tls_key_file")
            if not getattr(self, name)
        ]
        if self.aws_port >= 0 and not self.aws_keys_dir:
            missing.append(PREFIX + "AWS_KEYS_DIR")
        if missing:
            return (
                f"set {', '.join(missing)} (or {PREFIX}INSECURE=true for a plaintext "
                "development server where every caller is an admin)"
            )
        return None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Fields from `QM_ADMISSION_*` variables; unset ones keep their defaults."""
        try:
            return from_env(cls, PREFIX, environ)
        except EnvSettingsError as err:
            raise SettingsError(str(err)) from err
