"""Whole Responses servers made of recordings, for `responses-gateway check` to examine.

`VllmLikeServer` answers as vLLM's `/v1/responses` does: its recorded streams, byte for byte, with their real
defects (reasoning items under `msg_` ids, a first content part at `content_index` 1, `response.completed`
listing items under other ids than the streamed ones), no response store (vLLM keeps none unless told to), and
its nested error bodies. `OpenAILikeServer` answers as OpenAI does, from OpenAI's recorded exchanges: streams,
JSON bodies, retrieve by id, OpenAI's error bodies.

Each picks the recording from the request, as the real server's answer would follow it.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .fake_chat import _json_response
from .fake_responses import (
    FakeResponsesUpstream,
    Json,
    RecordedRequest,
    Stream,
    error_json,
    terminal_response,
)
from .recordings import RECORDINGS_DIR, Recording, load_recording


def _recording(folder: str, name: str) -> Recording:
    return load_recording(RECORDINGS_DIR / folder / f"{name}.yaml")


def _tool_types(body: dict) -> set[str]:
    return {tool.get("type") for tool in body.get("tools") or [] if isinstance(tool, dict)}


def _bad_temperature(body: dict) -> bool:
    return "temperature" in body and not isinstance(body["temperature"], (int, float))


class VllmLikeServer(FakeResponsesUpstream):
    def __init__(self) -> None:
        super().__init__(models=["openai/gpt-oss-20b"])
        self.text = _recording("vllm_responses", "gptoss20b-responses-text-stream")
        self.function = _recording("vllm_responses", "gptoss20b-responses-function-stream-auto")
        self.default = self.answer

    @staticmethod
    def error(status: int, message: str, type_: str) -> Json:
        return Json({"error": {"message": message, "type": type_, "param": None, "code": status}}, status=status)

    def answer(self, request: RecordedRequest) -> Any:
        body = request.body or {}
        if _bad_temperature(body):
            return self.error(400, "1 validation error: temperature: Input should be a valid number", "BadRequestError")
        if body.get("previous_response_id"):
            # vLLM keeps no responses unless VLLM_ENABLE_RESPONSES_API_STORE is set
            return self.error(404, f"Response with id '{body['previous_response_id']}' not found.", "NotFoundError")
        recording = self.function if "function" in _tool_types(body) else self.text
        if body.get("stream"):
            return Stream(list(recording.sse_chunks or ()))
        return Json(terminal_response(recording))

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/responses/{id}", self._retrieve)

    async def _retrieve(self, request: web.Request) -> web.Response:
        script = self.error(404, f"Response with id '{request.match_info['id']}' not found.", "NotFoundError")
        return _json_response(script)


def _as_custom_tool_call(chunks: list[str]) -> list[str]:
    """OpenAI's recorded function-call stream, as the same answer to a custom tool: custom_tool_call items
    (ctc_ ids, `input` for `arguments`) and response.custom_tool_call_input.* events, byte layout unchanged."""
    out = []
    for chunk in chunks:
        for old, new in (('"type":"function_call"', '"type":"custom_tool_call"'),
                         ("response.function_call_arguments.", "response.custom_tool_call_input."),
                         ('"arguments":', '"input":'), ('"fc_', '"ctc_'),
                         ('"type":"function","description"', '"type":"custom","description"')):
            chunk = chunk.replace(old, new)
        out.append(chunk)
    return out


class OpenAILikeServer(FakeResponsesUpstream):
    def __init__(self) -> None:
        super().__init__(models=["gpt-5-nano"])
        self.text = _recording("openai_responses", "text-single")
        self.text_stream = _recording("openai_responses", "text-single-stream")
        self.function_stream = _recording("openai_responses", "tool-function-tool_loop-step1-stream")
        self.followup_stream = _recording("openai_responses", "tool-function-tool_loop-step2-omit-tools-stream")
        self.stored: dict[str, dict] = {}
        self.default = self.answer

    @staticmethod
    def error(status: int, message: str, param: str | None = None, code: str | None = None) -> Json:
        return error_json(status, message, type="invalid_request_error", param=param, code=code)

    def answer(self, request: RecordedRequest) -> Any:
        body = request.body or {}
        if _bad_temperature(body):
            return self.error(400, "Invalid type for 'temperature': expected a decimal, but got a string instead.",
                              "temperature", "invalid_type")
        previous = body.get("previous_response_id")
        if previous and previous not in self.stored:
            return self.error(400, f"Previous response with id '{previous}' not found.", "previous_response_id",
                              "previous_response_not_found")
        if not body.get("stream"):
            response = self.text.body or {}
            self.stored[response["id"]] = response
            return Json(response)
        tools = _tool_types(body)
        if previous:
            recorded = self.followup_stream.request_body["previous_response_id"]
            return Stream([c.replace(recorded, previous) for c in self.followup_stream.sse_chunks or ()])
        if "custom" in tools:
            return Stream(_as_custom_tool_call(list(self.function_stream.sse_chunks or ())))
        recording = self.function_stream if "function" in tools else self.text_stream
        return Stream(list(recording.sse_chunks or ()))

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/responses/{id}", self._retrieve)

    async def _retrieve(self, request: web.Request) -> web.Response:
        found = self.stored.get(request.match_info["id"])
        if found is None:
            script = self.error(404, f"Response with id '{request.match_info['id']}' not found.", "response_id")
            return _json_response(script)
        return _json_response(Json(json.loads(json.dumps(found))))
