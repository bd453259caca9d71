"""The gateway's one error model, below HTTP: every failure a client can see, as data.

An `APIError` carries the five things OpenAI's errors have — the HTTP status and the body's `message`,
`type`, `param` and `code` — and nothing about how it is sent: `api/errors.py` renders it as a response,
the pipeline as a `response.failed` event. Request parsing, state, routing and the adapters raise these and
never import the HTTP layer.

    APIError                 a request the gateway refuses (a 4xx of its own, or its one 500)
    ├── RateLimited          refused at the front door (door.py): a 429 that says when to retry
    ├── UpstreamError        the upstream failed: before the stream it is answered with its own status;
    │                        during the stream it becomes `response.failed`
    └── StoreUnavailable     the database did not answer within --db-timeout (a 503; nothing is lost)

How an upstream's HTTP error status becomes the error OpenAI would give is decided once, here
(`upstream_status_error`); each adapter only reads its own wire's error body.
"""

from __future__ import annotations

import math
from typing import Any


class APIError(Exception):
    """An error with the HTTP status and body OpenAI would send for it."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """HTTP headers that go with the error (none but a 429's `retry-after`)."""
        return {}


class RateLimited(APIError):
    """Over a limit of the front door (door.py): OpenAI's 429 (`type: "requests"`). `reason` names the limit
    (the label of `responses_gateway_requests_limited_total`); `retry_after`: seconds until a retry can pass."""

    def __init__(self, message: str, reason: str, retry_after: float):
        super().__init__(429, message, type="requests", code="rate_limit_exceeded")
        self.reason = reason
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"retry-after": str(max(1, math.ceil(self.retry_after)))}


class UpstreamError(APIError):
    """The upstream failed. Before the stream: answered with `status`. During it: `response.failed`.

    `detail`: what the upstream itself said, for the gateway's log (the client gets `message`)."""

    def __init__(self, message: str, *, status: int = 502, code: str | None = "upstream_error",
                 type: str = "server_error", param: str | None = None, detail: str | None = None):
        super().__init__(status, message, type=type, param=param, code=code)
        self.detail = detail


class StoreUnavailable(APIError):
    """The database did not answer in time or lost its connection: the request fails, nothing is lost."""

    def __init__(self) -> None:
        super().__init__(503, "The gateway's database is not answering; please retry.", type="server_error",
                         code="store_unavailable")


def invalid(message: str, param: str | None = None, code: str | None = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def unsupported(param: str, what: str | None = None) -> APIError:
    """A field OpenAI knows that this gateway cannot honour: refused by name, never silently dropped."""
    subject = what or f"'{param}'"
    return APIError(
        400,
        f"{subject} is not supported by this gateway.",
        param=param,
        code="unsupported_parameter",
    )


def model_not_found(model: str | None) -> str:
    """The message of a 404 `model_not_found`, whether the router or the upstream does not know the model."""
    return f"The model `{model}` does not exist or you do not have access to it."


SERVER_ERROR = APIError(
    500,
    "The server had an error while processing your request. Sorry about that!",
    type="server_error",
)


def upstream_status_error(status: int, message: str, model: str | None, *, model_missing: bool,
                          code: str | None = None, param: str | None = None,
                          context_phrases: tuple[str, ...] = ()) -> UpstreamError:
    """An upstream's HTTP error answer (before any stream) as the error OpenAI would give.

    The adapter has read its wire's error body: `message`, the `code`/`param` it names (kept for the
    client's own 4xx), whether a 404 means the model is missing, and the phrases by which its servers
    say the input is longer than the context window. Credential failures are the gateway's problem, not
    the client's, so they are a 502. A 404 that is not about a model (`model` None: a model list) means the
    gateway called a path the upstream does not have: its upstream URL is wrong (most often, `/v1` left out)."""
    if status == 404 and model_missing and model is not None:
        return UpstreamError(model_not_found(model), status=404, code="model_not_found", type="invalid_request_error",
                             detail=message)
    if status == 404:
        return UpstreamError(NO_SUCH_PATH, status=502, code="upstream_error", detail=message)
    if status in (400, 413, 422):
        lowered = message.lower()
        if any(phrase in lowered for phrase in context_phrases):
            code = "context_length_exceeded"
            param = param or "input"
        return UpstreamError(message, status=400, code=code, type="invalid_request_error", param=param,
                             detail=message)
    if status == 429:
        return UpstreamError(message or "The upstream is rate limiting requests.", status=429,
                             code="rate_limit_exceeded", type="requests", detail=message)
    if status in (401, 403):
        return UpstreamError("The upstream model server rejected the gateway's credentials.", status=502,
                             code="upstream_auth_failed", detail=message)
    if status in (503, 529):
        return UpstreamError(f"The upstream model server is overloaded or unavailable (HTTP {status}).",
                             status=503, code="upstream_unavailable", detail=message)
    return UpstreamError(f"The upstream model server failed (HTTP {status}): {message}"[:500], status=502,
                         code="upstream_error", detail=message)


NO_SUCH_PATH = ("The upstream model server answered 404 Not Found to the gateway: the gateway's upstream URL is "
                "probably wrong (an OpenAI-compatible base URL usually ends in /v1).")
