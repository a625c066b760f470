"""The bootstrap's parts as Kubernetes Secrets, through the API server's REST interface.

The bootstrap Job reads Secret `qm-bootstrap-credentials` back first (so a rerun keeps
the CA, the keys, the AWS access keys and the passwords), then creates or replaces one
Secret per part: `qm-bootstrap-<part>`, keys the part's file names. Plain HTTPS with the pod's
ServiceAccount token (urllib: no Kubernetes client in the images); its Role may get,
create and update Secrets in the namespace, nothing else.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER_API = "https://kubernetes.default.svc"
LABELS = {"app.kubernetes.io/part-of": "quartermaster", "app.kubernetes.io/managed-by": "qm"}


class KubeError(RuntimeError):
    """The API server refused or failed a request (the message has its answer)."""


def secret_name(part: str) -> str:
    return f"qm-bootstrap-{part}"


class SecretsApi(msgspec.Struct, frozen=True, kw_only=True):
    """Secrets of one namespace. `token_file` and `ca_file` default to the pod's own."""

    namespace: str
    api_url: str = IN_CLUSTER_API
    token_file: Path = SERVICE_ACCOUNT / "token"
    ca_file: Path | None = SERVICE_ACCOUNT / "ca.crt"  # None: the system's CAs

    @classmethod
    def in_cluster(cls, namespace: str = "", api_url: str = IN_CLUSTER_API) -> SecretsApi:
        """As the pod's ServiceAccount, in `namespace` (default: the pod's own)."""
        own = (SERVICE_ACCOUNT / "namespace").read_text().strip() if not namespace else ""
        return cls(namespace=namespace or own, api_url=api_url)

    def get(self, name: str) -> dict[str, bytes] | None:
        """The Secret's data, None if there is none of that name."""
        found = self._call("GET", f"secrets/{name}", missing_ok=True)
        if found is None:
            return None
        data: dict[str, str] = found.get("data") or {}
        return {key: base64.b64decode(value) for key, value in data.items()}

    def put(self, name: str, data: Mapping[str, bytes]) -> None:
        """Create the Secret, or replace its data if it exists and differs."""
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": name, "namespace": self.namespace, "labels": LABELS},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }
        current = self._call("GET", f"secrets/{name}", missing_ok=True)
        if current is None:
            self._call("POST", "secrets", body)
        elif (current.get("data") or {}) != body["data"]:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self._call("PUT", f"secrets/{name}", body)

    def _call(
        self, method: str, path: str, body: object = None, *, missing_ok: bool = False
    ) -> dict[str, Any] | None:
        url = f"{self.api_url.rstrip('/')}/api/v1/namespaces/{self.namespace}/{path}"
        request = urllib.request.Request(
            url,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.token_file.read_text().strip()}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        context = None
        if url.startswith("https:"):
            context = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:
                found: dict[str, Any] = json.load(answer)
                return found
        except urllib.error.HTTPError as err:
            if missing_ok and err.code == 404:
                return None
            detail = err.read().decode(errors="replace")[:500]
            raise KubeError(f"{method} {url}: {err.code} {detail}") from err
        except (urllib.error.URLError, OSError) as err:
            raise KubeError(f"{method} {url}: {err}") from err
