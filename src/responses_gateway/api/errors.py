"""OpenAI-style errors: every failure a client sees is `{"error": {message, type, param, code}}`."""

from __future__ import annotations

import orjson
from starlette.responses import Response


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

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> Response:
        return error_response(self.status, self.body())


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


def error_response(status: int, body: dict, headers: dict | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


SERVER_ERROR = APIError(
    500,
    "The server had an error while processing your request. Sorry about that!",
    type="server_error",
)
