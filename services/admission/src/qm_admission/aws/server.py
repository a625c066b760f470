"""The AWS-compatible endpoint: Batch (rest-json), SageMaker (JSON 1.1), IAM and STS
(query), on admission's own loop beside the gRPC server.

One path with the gRPC API: a request is authenticated (SigV4 against the key
ring; `qm up --insecure` takes unsigned requests as admin), the principal is set
where the servicers read it (`access.current`, recorded on every event written),
the RPC's permission is checked as the gRPC interceptor checks it, the request is
screened (`RequestScreen`: hostile strings, ARNs for ids, page tokens) and the
same servicer method answers it. Reads see this process's writes
(`Consistency` waits for the newest append it made). SageMaker's training jobs
are read from the folded state (`training_jobs`); StopTrainingJob and
UpdateTrainingJob are the TerminateServiceJob and UpdateWarmPool RPCs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, unquote

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf.message import Message

from qm_admission import access
from qm_admission.aws import batch, identity, training_jobs
from qm_admission.aws.errors import (
    AwsError,
    client_fault,
    rejected,
    server_fault,
    unavailable,
)
from qm_admission.aws.inbound import request_from
from qm_admission.aws.sigv4 import Credential, SignatureRejected, check_signature, credential
from qm_admission.consistency import Consistency
from qm_admission.errors import Code, RequestRejected, invalid
from qm_admission.interceptors import TRANSIENT_ERRORS
from qm_admission.paging import PageTokenSeal
from qm_admission.screening import RequestScreen
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal
from quartermaster.auth.access_keys import KeyRing
from quartermaster.core.training_job import training_job_arn
from quartermaster.store.errors import InvalidFilterError, InvalidNextTokenError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 2 * 1024 * 1024
BODY_TIMEOUT_SECONDS = 30.0
SERVICES = ("batch", "sagemaker", "iam", "sts")
JSON_11 = "application/x-amz-json-1.1"
SAGEMAKER_PREFIX = "SageMaker."
LIST_TRAINING_JOBS = "/aws/SageMaker/ListTrainingJobs"  # its page tokens' seal scope

Unary = Callable[[Any, Any], Awaitable[Any]]
Body = dict[str, Any]


class _ClientFaults(logging.Filter):
    """aiohttp logs every request it cannot parse (a header over its line limit, a bad
    request line) as an ERROR with a traceback: a client could fill the log at will.
    Those are the client's faults, answered 400 by aiohttp: kept at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError) and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return _HTTP_LOG.isEnabledFor(logging.DEBUG)
        return True


_HTTP_LOG = logging.getLogger("qm_admission.aws.http")
_HTTP_LOG.addFilter(_ClientFaults())


class HttpContext:
    """What the servicers use of a gRPC context, for a call that came over HTTP."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> None:
        return None

    def set_trailing_metadata(self, metadata: object) -> None:
        pass

    async def send_initial_metadata(self, metadata: object) -> None:
        pass


class Refused(Exception):
    """An AWS error answer, ready to send."""

    def __init__(self, error: AwsError) -> None:
        super().__init__(error.message)
        self.error = error


class AwsEndpoint:
    def __init__(
        self,
        *,
        rpcs: Mapping[str, Unary],
        screen: RequestScreen,
        consistency: Consistency,
        seal: PageTokenSeal,
        keys: KeyRing | None,
        roles: Callable[[], frozenset[str] | None],
    ) -> None:
        """`rpcs`: each gRPC method path's servicer method; `keys` None: unsigned
        requests are taken as admin (a plaintext development stack)."""
        self._rpcs = {path: screen.unary(path, call) for path, call in rpcs.items()}
        self._consistency = consistency
        self._seal = seal
        self._keys = keys
        self._roles = roles
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ---- lifecycle ------------------------------------------------------------------
    async def start(
        self, host: str, port: int, tls: ssl.SSLContext | None, grace: float = 5.0
    ) -> int:
        """Serve on `host:port`; a stop waits at most `grace` seconds for calls in flight."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, logger=_HTTP_LOG, shutdown_timeout=grace
        )
        await self._runner.setup()
        try:
            site = web.TCPSite(self._runner, host, port, ssl_context=tls, reuse_port=False)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- one request ----------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        request_id = str(uuid.uuid4())
        family = _family(request)
        try:
            if ".." in request.raw_path.split("?", 1)[0].split("/") or "/./" in request.raw_path:
                raise Refused(client_fault(family, "the path must not have . or .. segments"))
            claim = self._claim(request)  # before the body: an unsigned request costs none
            body = await _body(request, family)
            signed = self._authenticate(request, claim, body)
            token = access.current.set(signed[0])
            try:
                return await self._route(request, family, body, signed, request_id)
            finally:
                access.current.reset(token)
        except Refused as refused:
            return _error(family, refused.error, request_id)
        except RequestRejected as err:
            return _error(family, rejected(family, err), request_id)
        except InvalidNextTokenError as err:
            return _error(family, client_fault(family, f"nextToken: {err}"), request_id)
        except InvalidFilterError as err:
            return _error(family, client_fault(family, str(err)), request_id)
        except TRANSIENT_ERRORS as err:
            log.warning("aws request unavailable path=%s: %s", request.path, err)
            return _error(family, unavailable(family, str(err)), request_id)
        except Exception:
            log.exception("aws request failed path=%s", request.path)
            return _error(family, server_fault(family), request_id)

    def _claim(self, request: web.Request) -> Credential | None:
        """The request's key, scope and date, checked (None: this endpoint takes unsigned
        requests as admin)."""
        if self._keys is None:
            return None
        try:
            return credential(
                headers=lambda name: request.headers.getall(name, []),
                lookup=self._keys.lookup,
                now=time.time(),
                services=SERVICES,
            )
        except SignatureRejected as err:
            raise Refused(AwsError(403, err.code, err.message)) from err

    def _authenticate(
        self, request: web.Request, claim: Credential | None, body: bytes
    ) -> tuple[Principal, str]:
        if claim is None:
            return access.ANONYMOUS_ADMIN, ""
        raw_path, _, raw_query = request.raw_path.partition("?")
        try:
            signed = check_signature(
                claim,
                method=request.method,
                raw_path=raw_path,
                raw_query=raw_query,
                headers=lambda name: request.headers.getall(name, []),
                body=body,
            )
        except SignatureRejected as err:
            raise Refused(AwsError(403, err.code, err.message)) from err
        return signed.principal, signed.access_key_id

    async def _route(
        self,
        request: web.Request,
        family: str,
        body: bytes,
        signed: tuple[Principal, str],
        request_id: str,
    ) -> web.StreamResponse:
        if family == "sagemaker":
            target = request.headers.get("X-Amz-Target", "")
            data = _json_object(body) if body else {}
            answer = await self._sagemaker(target.removeprefix(SAGEMAKER_PREFIX), data)
            return web.Response(
                body=json.dumps(answer).encode(),
                content_type=JSON_11,
                headers={"x-amzn-RequestId": request_id},
            )
        if family == "query":
            return self._query(body, signed, request_id)
        return await self._batch(request, body, request_id)

    # ---- Batch ----------------------------------------------------------------------
    async def _batch(self, request: web.Request, body: bytes, request_id: str) -> web.Response:
        path = request.path
        if path.startswith(batch.TAGS_PREFIX):
            op = batch.TAGS.get(request.method)
            if op is None:
                raise Refused(client_fault("batch", f"{request.method} {path} is not an operation"))
            data = _json_object(body) if body and request.method == "POST" else {}
            # The ARN as sent, decoded once (the routed path is decoded already).
            raw = request.raw_path.split("?", 1)[0].removeprefix(batch.TAGS_PREFIX)
            data = {**data, "resourceArn": unquote(raw)}
            if request.method == "DELETE":
                data["tagKeys"] = request.query.getall("tagKeys", [])
        else:
            found = batch.BY_PATH.get(path.lower())
            if found is None or request.method != "POST":
                raise Refused(
                    client_fault("batch", f"{request.method} {path} is not an AWS Batch operation")
                )
            op = found
            data = _json_object(body) if body else {}
        message = request_from(batch.body_for(op, data), op.request)
        response = await self._call(op.rpc, message)
        return web.Response(
            body=json.dumps(op.render(response)).encode(),
            content_type="application/json",
            headers={"x-amzn-RequestId": request_id},
        )

    async def _call(self, rpc: str, message: Message) -> Any:
        access.check_method(access.caller(), rpc)
        return await self._rpcs[rpc](message, HttpContext())

    # ---- SageMaker ------------------------------------------------------------------
    async def _sagemaker(self, operation: str, data: Body) -> Body:
        handler = {
            "DescribeTrainingJob": self._describe_training_job,
            "ListTrainingJobs": self._list_training_jobs,
            "StopTrainingJob": self._stop_training_job,
            "UpdateTrainingJob": self._update_training_job,
        }.get(operation)
        if handler is None:
            raise Refused(
                AwsError(400, "UnknownOperationException", f"{operation!r} is not an operation")
            )
        return await handler(data)

    async def _training_job(self, data: Body, rpc: str) -> tuple[Any, Any, Any]:
        access.check_method(access.caller(), rpc)
        name = data.get("TrainingJobName")
        if not isinstance(name, str) or not name:
            raise invalid("TrainingJobName", "is required (a string)")
        state = await self._consistency.folded(HttpContext())
        job, attempt = training_jobs.find(state, name)
        access.require_share(access.P.JOBS_READ, job.queue, job.share)
        return state, job, attempt

    async def _describe_training_job(self, data: Body) -> Body:
        state, job, attempt = await self._training_job(
            data, "/qm.v1.ServiceJobs/DescribeServiceJob"
        )
        return training_jobs.describe(state, job, attempt)

    async def _stop_training_job(self, data: Body) -> Body:
        rpc = "/qm.v1.ServiceJobs/TerminateServiceJob"
        _, job, attempt = await self._training_job(data, rpc)
        if not training_jobs.is_live(job, attempt):
            status = training_jobs.status(job, attempt)[0]
            raise RequestRejected(
                Code.FAILED_PRECONDITION,
                "TrainingJobName",
                f"The training job is in status {status}: only an InProgress job can be stopped",
            )
        reason = f"Stopped by StopTrainingJob ({data['TrainingJobName']})"
        await self._call(rpc, pb.TerminateServiceJobRequest(job_id=job.job_id, reason=reason))
        return {}

    async def _update_training_job(self, data: Body) -> Body:
        rpc = "/qm.v1.WarmPools/UpdateWarmPool"
        _, job, attempt = await self._training_job(data, rpc)
        config = data.get("ResourceConfig")
        if not isinstance(config, dict) or "KeepAlivePeriodInSeconds" not in config:
            raise invalid(
                "ResourceConfig.KeepAlivePeriodInSeconds",
                "is required: it is what UpdateTrainingJob changes here",
            )
        extra = sorted(set(data) - {"TrainingJobName", "ResourceConfig"})
        if extra:
            raise invalid(extra[0], "cannot be updated on this endpoint")
        seconds = config["KeepAlivePeriodInSeconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise invalid("ResourceConfig.KeepAlivePeriodInSeconds", "must be an integer")
        if not training_jobs.is_latest(job, attempt):
            raise RequestRejected(
                Code.FAILED_PRECONDITION,
                "TrainingJobName",
                "the training job was retried: update its latest attempt's training job",
            )
        request = pb.UpdateWarmPoolRequest(job_id=job.job_id)
        try:
            request.keep_alive_period_in_seconds = seconds
        except ValueError:
            raise invalid("ResourceConfig.KeepAlivePeriodInSeconds", "is out of range") from None
        await self._call(rpc, request)
        return {"TrainingJobArn": training_job_arn(data["TrainingJobName"])}

    async def _list_training_jobs(self, data: Body) -> Body:
        access.check_method(access.caller(), "/qm.v1.ServiceJobs/ListServiceJobs")
        query = training_jobs.ListQuery.parse(data)
        offset = 0
        if query.next_token:
            try:
                offset = int(self._seal.open(LIST_TRAINING_JOBS, query.next_token))
            except (InvalidNextTokenError, ValueError) as err:
                raise invalid(
                    "NextToken", f"is not a token this endpoint handed out: {err}"
                ) from err
        state = await self._consistency.folded(HttpContext())
        principal = access.caller()
        visible = (
            (job, attempt)
            for job, attempt in training_jobs.attempts(state)
            if principal.reads_share(job.queue, job.share)
        )
        page, more = query.page(state, visible, offset)
        out: Body = {"TrainingJobSummaries": page}
        if more:
            out["NextToken"] = self._seal.seal(LIST_TRAINING_JOBS, str(offset + len(page)))
        return out

    # ---- IAM and STS ----------------------------------------------------------------
    def _query(self, body: bytes, signed: tuple[Principal, str], request_id: str) -> web.Response:
        try:
            params = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise invalid("Action", "the body is not form-encoded text") from None
        action = (params.get("Action") or [""])[0]
        xml = identity.answer(
            action,
            params,
            principal=signed[0],
            access_key_id=signed[1],
            roles=self._roles(),
            request_id=request_id,
        )
        return web.Response(text=xml, content_type="text/xml")


def _family(request: web.Request) -> str:
    """Which protocol a request speaks: `batch`, `sagemaker` or `query` (IAM, STS)."""
    if request.headers.get("X-Amz-Target", "").startswith(SAGEMAKER_PREFIX):
        return "sagemaker"
    if request.path.startswith("/v1/"):
        return "batch"
    if request.content_type == "application/x-www-form-urlencoded":
        return "query"
    return "batch"


async def _body(request: web.Request, family: str) -> bytes:
    try:
        async with asyncio.timeout(BODY_TIMEOUT_SECONDS):
            return await request.read()
    except TimeoutError:
        raise Refused(
            client_fault(family, f"the body did not arrive within {BODY_TIMEOUT_SECONDS:.0f} s")
        ) from None
    except web.HTTPRequestEntityTooLarge:
        raise Refused(client_fault(family, f"the body exceeds {MAX_BODY_BYTES} bytes")) from None


def _json_object(body: bytes) -> Body:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise invalid("", f"the body is not valid JSON: {err}") from None
    except RecursionError:  # arrays or objects nested a few thousand deep
        raise invalid("", "the body is not valid JSON: it is nested too deeply") from None
    if not isinstance(data, dict):
        raise invalid("", "the body must be a JSON object")
    return data


def _error(family: str, error: AwsError, request_id: str) -> web.Response:
    headers = {"x-amzn-RequestId": request_id, "x-amzn-ErrorType": error.code}
    if family == "query":
        kind = "Receiver" if error.status >= 500 else "Sender"
        xml = identity.error_xml(kind, error.code, error.message, request_id)
        return web.Response(status=error.status, text=xml, content_type="text/xml", headers=headers)
    content_type = JSON_11 if family == "sagemaker" else "application/json"
    body = {"__type": error.code, "message": error.message}
    return web.Response(
        status=error.status,
        body=json.dumps(body).encode(),
        content_type=content_type,
        headers=headers,
    )
