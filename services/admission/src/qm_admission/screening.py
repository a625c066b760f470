"""The interceptor that screens every request before its servicer sees it.

It runs innermost (last in the server's list: after authentication, and inside
`ErrorInterceptor`, which turns its rejections into INVALID_ARGUMENT with the field):
1. `validation.hostile.check_request`: no string that storage cannot hold, no enum
   number the API does not define, in any field of any request;
2. a request's `next_token` is opened (`PageTokenSeal`): the servicer gets the
   token it handed out, or the call is refused;
3. a reply's `next_token` is sealed on the way out;
4. ARNs AWS takes in place of ids (a job ARN for a job id, `quota_share_arn`) are
   resolved in place (`references`).
Fields are found by name through the message descriptors, so a new RPC is covered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.message import Message

from qm_admission.interceptors import Streaming, Unary, WrappingInterceptor
from qm_admission.paging import PageTokenSeal
from qm_admission.references import resolve
from qm_admission.validation.hostile import check_request

TOKEN_FIELD = "next_token"


class RequestScreen(WrappingInterceptor):
    def __init__(self, seal: PageTokenSeal) -> None:
        self._seal = seal

    @property
    def seal(self) -> PageTokenSeal:
        """The page-token seal (other endpoints' tokens use the same key)."""
        return self._seal

    def screen(self, method: str, request: Message) -> None:
        """Check `request` and open its page token in place."""
        check_request(request)
        resolve(request)
        if _has_token(request):
            setattr(request, TOKEN_FIELD, self._seal.open(method, getattr(request, TOKEN_FIELD)))

    def unary(self, method: str, behavior: Unary) -> Unary:
        async def call(request: Any, context: Any) -> Any:
            self.screen(method, request)
            response = await behavior(request, context)
            if isinstance(response, Message) and _has_token(response):
                token = getattr(response, TOKEN_FIELD)
                setattr(response, TOKEN_FIELD, self._seal.seal(method, token))
            return response

        return call

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            self.screen(method, request)
            async for item in behavior(request, context):
                yield item

        return call


def _has_token(message: Message) -> bool:
    """The message has a string `next_token` field and it is set."""
    field = message.DESCRIPTOR.fields_by_name.get(TOKEN_FIELD)
    if field is None or field.type != field.TYPE_STRING:
        return False
    return bool(getattr(message, TOKEN_FIELD))


def request_screen(page_token_secret: str) -> RequestScreen:
    """The screen for a server's settings; keep it last among the server's interceptors."""
    return RequestScreen(PageTokenSeal.from_secret(page_token_secret))
