"""Where the client finds its credentials, and the channel each finding gives."""

from __future__ import annotations

from pathlib import Path

from quartermaster.client.credentials import find_credentials


def test_qm_ups_directory_is_found_by_default_and_env_overrides_it(tmp_path: Path) -> None:
    creds = tmp_path / ".qm-data" / "credentials"
    creds.mkdir(parents=True)
    (creds / "ca.pem").write_bytes(b"CA")
    (creds / "admin.token").write_text("admin-token\n")
    env = {"QM_DATA_DIR": str(tmp_path / ".qm-data")}
    found = find_credentials(environ=env)
    assert (found.ca_pem, found.token, found.insecure) == (b"CA", "admin-token", False)
    assert find_credentials(environ=env | {"QM_TOKEN": "mine"}).token == "mine"
    assert find_credentials(environ=env | {"QM_INSECURE": "1"}).insecure
    assert find_credentials(token="arg", environ=env).token == "arg"


def test_no_credentials_anywhere_is_plaintext(tmp_path: Path) -> None:
    found = find_credentials(environ={"QM_DATA_DIR": str(tmp_path / "none")})
    assert (found.ca_pem, found.token) == (b"", "")
    found.channel("127.0.0.1:1").close()


def test_a_ca_without_a_token_still_makes_a_tls_channel(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    found = find_credentials(ca_file=ca, token="", environ={"QM_DATA_DIR": str(tmp_path)})
    assert found.token == ""
    found.channel("127.0.0.1:1").close()  # raised StopIteration before the fix
