"""Where a training job's data comes from and goes, checked at submit as SageMaker would.

The node agent stages each `InputDataConfig` channel before the attempt starts and
uploads the model to `OutputDataConfig.S3OutputPath` after it; a location or mode it
cannot serve would otherwise fail the attempt on a host, after the job waited its
turn. Admission refuses it at once, naming the field. Local channels (an absolute
path or a `file://` URI as `S3Uri`, or a `FileSystemDataSource`) keep working: hosts
of a development stack read them from their own disk.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import unquote, urlparse

from qm_admission.errors import invalid
from qm_admission.validation.hostile import json_key_path
from qm_admission.validation.json_fields import a_string, an_object
from quartermaster.objectstore import parse_s3_uri

# SageMaker's ChannelName: [A-Za-z0-9\.\-_]+, 1-64 characters.
_CHANNEL_NAME = re.compile(r"[A-Za-z0-9.\-_]{1,64}")
INPUT_MODES = ("File", "FastFile")  # FastFile is staged as File
DATA_TYPES = ("S3Prefix", "ManifestFile")
DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")
# Hosts restore checkpoints inside the job's /opt/ml tree (as the node agent places them).
ML_DIR = "/opt/ml/"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"


def check_training_data(doc: dict[str, Any], at: str) -> bool:
    """Refuse the first bad channel, output, checkpoint or hyperparameter of the payload
    `doc` (found at `at`); True when it names any S3 location (its role must reach it)."""
    _training_input_mode(doc, at)
    names_s3 = _channels(doc, at)
    output = an_object(doc, "OutputDataConfig", at)
    if _s3_uri(output, "S3OutputPath", f"{at}.OutputDataConfig") is not None:
        names_s3 = True
    names_s3 = _checkpoint(doc, at) or names_s3
    _hyperparameters(doc, at)
    return names_s3


def _training_input_mode(doc: dict[str, Any], at: str) -> None:
    """The job's mode, which channels without an InputMode of their own take."""
    spec = an_object(doc, "AlgorithmSpecification", at)
    _input_mode(spec, "TrainingInputMode", f"{at}.AlgorithmSpecification")


def _input_mode(doc: dict[str, Any], key: str, at: str) -> str | None:
    mode = a_string(doc, key, at)
    if mode is None or mode in INPUT_MODES:
        return mode
    if mode == "Pipe":
        raise invalid(f"{at}.{key}", "Pipe mode is not supported; use File or FastFile")
    raise invalid(f"{at}.{key}", f"must be File or FastFile, got {mode!r}")


def _channels(doc: dict[str, Any], at: str) -> bool:
    """Check each channel; True when one reads from S3."""
    channels = doc.get("InputDataConfig")
    if channels is None:
        return False
    if not isinstance(channels, list):
        raise invalid(f"{at}.InputDataConfig", "must be a list of channels")
    names_s3 = False
    seen: set[str] = set()
    for index, channel in enumerate(channels):
        where = f"{at}.InputDataConfig[{index}]"
        if not isinstance(channel, dict):
            raise invalid(where, "must be a JSON object (a channel)")
        name = _channel_name(channel, where)
        if name in seen:
            raise invalid(f"{where}.ChannelName", f"channel {name!r} is given twice")
        seen.add(name)
        _input_mode(channel, "InputMode", where)
        a_string(channel, "ContentType", where)
        names_s3 = _data_source(channel, where) or names_s3
    return names_s3


def _channel_name(channel: dict[str, Any], where: str) -> str:
    name = a_string(channel, "ChannelName", where, required=True) or ""
    if not _CHANNEL_NAME.fullmatch(name) or name in (".", ".."):
        raise invalid(
            f"{where}.ChannelName",
            f"must be 1-64 characters of A-Z, a-z, 0-9, '.', '-', '_' "
            f"(and not '.' or '..'), got {name!r}",
        )
    return name


def _data_source(channel: dict[str, Any], where: str) -> bool:
    """Check a channel's DataSource; True when it reads from S3."""
    source = an_object(channel, "DataSource", where, required=True)
    where = f"{where}.DataSource"
    s3 = an_object(source, "S3DataSource", where)
    file_system = an_object(source, "FileSystemDataSource", where)
    if bool(s3) == bool(file_system):
        raise invalid(where, "needs exactly one of S3DataSource and FileSystemDataSource")
    if file_system:
        at = f"{where}.FileSystemDataSource"
        path = a_string(file_system, "DirectoryPath", at, required=True) or ""
        if not path.startswith("/"):
            raise invalid(f"{at}.DirectoryPath", f"must be an absolute path, got {path!r}")
        return False
    at = f"{where}.S3DataSource"
    data_type = a_string(s3, "S3DataType", at)
    if data_type is not None and data_type not in DATA_TYPES:
        raise invalid(
            f"{at}.S3DataType",
            f"{data_type!r} is not supported ({', '.join(DATA_TYPES)})",
        )
    distribution = a_string(s3, "S3DistributionType", at)
    if distribution is not None and distribution not in DISTRIBUTIONS:
        raise invalid(
            f"{at}.S3DistributionType",
            f"must be {' or '.join(DISTRIBUTIONS)}, got {distribution!r}",
        )
    uri = a_string(s3, "S3Uri", at, required=True) or ""
    if _is_local(uri, f"{at}.S3Uri"):
        return False
    _parse_s3(uri, f"{at}.S3Uri")
    return True


def _is_local(uri: str, field: str) -> bool:
    """An absolute local path or a file:// URI of this host (refused when malformed)."""
    if uri.startswith("/"):
        return True
    if not uri.startswith("file://"):
        return False
    try:
        parsed = urlparse(uri)
    except ValueError as err:  # e.g. an unclosed "[" where the host goes
        raise invalid(field, f"{uri!r} is not a valid file:// URI: {err}") from err
    if parsed.netloc not in ("", "localhost"):
        raise invalid(field, f"{uri!r} names another host; a file:// URI must be local")
    if not unquote(parsed.path).startswith("/"):
        raise invalid(field, f"{uri!r} must name an absolute path")
    return True


def _s3_uri(doc: dict[str, Any], key: str, at: str, *, required: bool = False) -> str | None:
    uri = a_string(doc, key, at, required=required)
    if uri is not None:
        _parse_s3(uri, f"{at}.{key}")
    return uri


def _parse_s3(uri: str, field: str) -> None:
    try:
        parse_s3_uri(uri)
    except ValueError as err:
        raise invalid(field, str(err)) from err


def _checkpoint(doc: dict[str, Any], at: str) -> bool:
    """Check CheckpointConfig; True when it is set (its S3Uri is required)."""
    config = an_object(doc, "CheckpointConfig", at)
    if not config:
        return False
    at = f"{at}.CheckpointConfig"
    _s3_uri(config, "S3Uri", at, required=True)
    local = a_string(config, "LocalPath", at)
    if local is not None and (
        ".." in local.split("/") or not posixpath.normpath(local).startswith(ML_DIR)
    ):
        raise invalid(
            f"{at}.LocalPath",
            f"must be a path under {ML_DIR} (the job's tree; default "
            f"{DEFAULT_CHECKPOINT_PATH}) without '..' parts, got {local!r}",
        )
    return True


def _hyperparameters(doc: dict[str, Any], at: str) -> None:
    """SageMaker's HyperParameters map strings to strings (clients stringify numbers)."""
    given = an_object(doc, "HyperParameters", at)
    for key, value in given.items():
        if not isinstance(value, str):
            raise invalid(
                json_key_path(f"{at}.HyperParameters", key),
                f"must be a string (HyperParameters map names to strings), got {_json_type(value)}",
            )


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return "a list" if isinstance(value, list) else "an object"
