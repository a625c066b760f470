"""IAM and STS, the query protocol: the calls the SageMaker SDK makes before it trains.

`ModelTrainer` asks STS who is calling (GetCallerIdentity), may read its execution
role (IAM GetRole) and asks whether that role may do what training needs
(SimulatePrincipalPolicy). The answers come from what this stack knows: the caller
is the access key's principal, the roles are the role map's (a role the map does
not name is NoSuchEntity), and a role in the map is what this stack runs jobs with:
every action the SDK checks it for (S3 on its bucket, and the CloudWatch, EC2 and
ECR permissions a SageMaker training role needs on AWS, which have no counterpart
here) is allowed; a role not in the map is an implicit deny. Answers are XML, as
the query protocol returns them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape as escape_markup

from qm_admission.errors import invalid, not_found
from quartermaster.auth import Principal
from quartermaster.core.training_job import DEFAULT_ACCOUNT

MAX_SIMULATED = 100
MAX_SIMULATED_PAIRS = 1000
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
IAM_NS = "https://iam.amazonaws.com/doc/2010-05-08/"
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
_TRUST = (
    "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow"
    "%22%2C%22Principal%22%3A%7B%22Service%22%3A%22sagemaker.amazonaws.com%22%7D%2C%22Action"
    "%22%3A%22sts%3AAssumeRole%22%7D%5D%7D"
)
# What XML 1.0 cannot hold even escaped (controls but tab, LF and CR, lone surrogates,
# U+FFFE and U+FFFF): a request may carry them, and a client's parser stops at them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def escape(text: str) -> str:
    """`text` as XML character data: markup escaped, what XML cannot hold as U+FFFD."""
    return escape_markup(_NOT_XML.sub("\ufffd", text))


def _wrap(action: str, namespace: str, result: str, request_id: str) -> str:
    return (
        f'<{action}Response xmlns="{namespace}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )


def error_xml(kind: str, code: str, message: str, request_id: str) -> str:
    return (
        f'<ErrorResponse xmlns="{STS_NS}"><Error><Type>{kind}</Type><Code>{escape(code)}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    )


def _members(params: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """`Name.member.1`, `Name.member.2`, ... in order."""
    found = []
    index = 1
    while (
        index <= MAX_SIMULATED + 1 and (values := params.get(f"{name}.member.{index}")) is not None
    ):
        found.append(values[0])
        index += 1
    return found


def _one(params: Mapping[str, Sequence[str]], name: str) -> str:
    values = params.get(name)
    if not values or not values[0]:
        raise invalid(name, "is required")
    return values[0]


def _role_name(arn_or_name: str) -> str:
    return arn_or_name.rsplit("/", 1)[-1]


def _role_arn(name: str, roles: frozenset[str] | None) -> str | None:
    """The role map's ARN named `name` (None: no such role). No map: any role exists."""
    if roles is None:
        return f"arn:aws:iam::{DEFAULT_ACCOUNT}:role/{name}"
    return next((r for r in sorted(roles) if _role_name(r) == name), None)


def answer(
    action: str,
    params: Mapping[str, Sequence[str]],
    *,
    principal: Principal,
    access_key_id: str,
    roles: frozenset[str] | None,
    request_id: str,
) -> str:
    """The XML answer of one IAM or STS action (RequestRejected for bad input)."""
    if action == "GetCallerIdentity":
        user = escape(principal.subject)
        result = (
            f"<Arn>arn:aws:iam::{DEFAULT_ACCOUNT}:user/{user}</Arn>"
            f"<UserId>{escape(access_key_id or principal.subject)}</UserId>"
            f"<Account>{DEFAULT_ACCOUNT}</Account>"
        )
        return _wrap(action, STS_NS, result, request_id)
    if action == "GetRole":
        name = _one(params, "RoleName")
        arn = _role_arn(name, roles)
        if arn is None:
            raise not_found("RoleName", f"The role with name {name} cannot be found.")
        role_id = "AROA" + hashlib.sha256(arn.encode()).hexdigest()[:17].upper()
        result = (
            f"<Role><Path>/</Path><RoleName>{escape(name)}</RoleName><RoleId>{role_id}</RoleId>"
            f"<Arn>{escape(arn)}</Arn><CreateDate>{_EPOCH}</CreateDate>"
            f"<AssumeRolePolicyDocument>{_TRUST}</AssumeRolePolicyDocument>"
            "<MaxSessionDuration>3600</MaxSessionDuration></Role>"
        )
        return _wrap(action, IAM_NS, result, request_id)
    if action == "SimulatePrincipalPolicy":
        source = _one(params, "PolicySourceArn")
        actions = _members(params, "ActionNames")
        if not actions:
            raise invalid("ActionNames", "needs at least one action")
        resources = _members(params, "ResourceArns") or ["*"]
        # The answer has a member per (action, resource): bounded, as AWS bounds the call.
        if len(actions) > MAX_SIMULATED or len(resources) > MAX_SIMULATED:
            raise invalid("ActionNames", f"takes at most {MAX_SIMULATED} actions and resources")
        if len(actions) * len(resources) > MAX_SIMULATED_PAIRS:
            raise invalid("ResourceArns", f"at most {MAX_SIMULATED_PAIRS} action-resource pairs")
        known = _role_arn(_role_name(source), roles) is not None
        results = []
        for name in actions:
            decision = "allowed" if known else "implicitDeny"
            for resource in resources:
                results.append(
                    f"<member><EvalActionName>{escape(name)}</EvalActionName>"
                    f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
                    f"<EvalDecision>{decision}</EvalDecision>"
                    "<MatchedStatements/><MissingContextValues/></member>"
                )
        result = (
            f"<EvaluationResults>{''.join(results)}</EvaluationResults>"
            "<IsTruncated>false</IsTruncated>"
        )
        return _wrap(action, IAM_NS, result, request_id)
    raise invalid("Action", f"{action!r} is not an action this endpoint answers")


ACTIONS = frozenset({"GetCallerIdentity", "GetRole", "SimulatePrincipalPolicy"})
