"""The request body of POST /v1/responses, validated once at the boundary with OpenAI's error shapes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from ..errors import APIError, invalid, unsupported
from .bounds import InputLayout, input_items


class StrictModel(BaseModel):
    """A request body model as OpenAI validates one: unknown fields refused, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


M = TypeVar("M", bound=StrictModel)


class Reasoning(StrictModel):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed", "none"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class TextFormat(StrictModel):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class Text(StrictModel):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class StreamOptions(StrictModel):
    include_obfuscation: bool | None = None


class CreateResponse(StrictModel):
    """Every top-level parameter OpenAI's endpoint knows; anything else is its 'Unknown parameter' 400."""

    model: str
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    include: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_output_tokens: int | None = Field(default=None, ge=16)
    max_tool_calls: int | None = Field(default=None, ge=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    text: Text | None = None
    reasoning: Reasoning | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: Literal["in-memory", "24h", "in_memory"] | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    store: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    background: bool | None = None
    truncation: Literal["auto", "disabled"] | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    context_management: list[dict[str, Any]] | None = None
    client_metadata: dict[str, Any] | None = None


class CompactRequest(StrictModel):
    """The body of POST /v1/responses/compact (openai-python `client.responses.compact`)."""

    model: str
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: Literal["in-memory", "24h", "in_memory"] | None = None
    service_tier: Literal["auto", "default", "fast", "flex", "scale", "priority"] | None = None
    image: dict[str, Any] | None = None

    def as_trigger(self) -> CreateResponse:
        """The same compaction as a `/v1/responses` request ending with a compaction trigger."""
        if self.image is not None:
            raise unsupported("image", "'image' on compaction")
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": self.input}] \
            if isinstance(self.input, str) else list(self.input or ())
        return CreateResponse(model=self.model, input=[*items, {"type": "compaction_trigger"}],
                              instructions=self.instructions, previous_response_id=self.previous_response_id,
                              prompt_cache_key=self.prompt_cache_key,
                              prompt_cache_retention=self.prompt_cache_retention, store=False)


# Values of `include` OpenAI accepts. The first two change what we return; the rest concern hosted tools or
# inputs this gateway never produces, so they are accepted without effect (see docs/request-fields.md).
INCLUDE_VALUES = (
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "code_interpreter_call.outputs",
)


def check_include(values: Sequence[str], extra: Collection[str]) -> None:
    """`include[]`: OpenAI's values, and `extra`, those the gateway-run tools of this build honour (the
    toolbox's, tools/kits.py)."""
    if not values:
        return
    known = include_values(extra)
    for i, value in enumerate(values):
        if value not in known:
            raise invalid(f"Invalid value: '{value}'. Supported values are: " + ", ".join(f"'{v}'" for v in known)
                          + ".", f"include[{i}]")


def include_values(extra: Collection[str]) -> tuple[str, ...]:
    return (*INCLUDE_VALUES, *(value for value in extra if value not in INCLUDE_VALUES))


def parse_request(raw: bytes | bytearray, layout: InputLayout | None = None) -> CreateResponse:
    """`layout` (from `bounds.check_body`): parse the input array's elements one by one (for a large body)."""
    req = _in_pieces(raw, layout) if layout is not None else None
    if req is None:
        req = _parse(CreateResponse, raw)
    check_semantics(req)
    return req


def _in_pieces(raw: bytes | bytearray, layout: InputLayout) -> CreateResponse | None:
    """The body parsed as the rest of it plus each input element on its own, with the same result and the same
    first error as one parse of the whole; None to parse the whole instead."""
    items = input_items(raw, layout)
    if items is None:
        return None
    head, tail = raw[:layout.start], raw[layout.end:]
    wrong = next((item for item in items if not isinstance(item, dict)), None)
    if wrong is not None:  # the whole body's first error, found on a body holding only this element
        _parse(CreateResponse, head + b"[" + orjson.dumps(wrong) + b"]" + tail)
        return None
    req = _parse(CreateResponse, head + b"[]" + tail)
    req.input = items
    return req


def request_from(fields: dict[str, Any]) -> CreateResponse:
    """A request from fields already parsed (a WebSocket frame's), validated as `parse_request` validates a
    body; a long input of objects is not encoded and parsed again."""
    items = fields.get("input")
    if isinstance(items, list) and len(items) > 100 and all(isinstance(item, dict) for item in items):
        req = _parse(CreateResponse, orjson.dumps({**fields, "input": []}))
        req.input = items
    else:
        req = _parse(CreateResponse, orjson.dumps(fields))
    check_semantics(req)
    return req


def conversation_id(value: str | dict[str, Any] | None) -> str | None:
    """`conversation` is an id or `{"id": ...}`."""
    if value is None or isinstance(value, str):
        return value
    cid = value.get("id")
    if not isinstance(cid, str) or set(value) - {"id"}:
        raise invalid("Invalid 'conversation': expected a conversation id or an object with an 'id'.",
                      "conversation")
    return cid


def check_metadata(metadata: dict[str, str] | None) -> None:
    """OpenAI's limits on `metadata`, wherever it is accepted (responses, conversations)."""
    if metadata is None:
        return
    if len(metadata) > 16:
        raise invalid("Invalid 'metadata': too many properties. Expected at most 16.", "metadata")
    for key, value in metadata.items():
        if len(key) > 64:
            raise invalid(f"Invalid 'metadata': key '{key[:70]}' is longer than 64 characters.", "metadata")
        if len(value) > 512:
            raise invalid(f"Invalid 'metadata.{key}': string longer than 512 characters.", f"metadata.{key}")


def parse_compact(raw: bytes | bytearray) -> CompactRequest:
    return _parse(CompactRequest, raw)


def _parse(model: type[M], raw: bytes | bytearray) -> M:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise to_api_error(exc) from None


def check_semantics(req: CreateResponse) -> None:
    """What the schema alone cannot say: metadata limits, field combinations. (`include` is checked by
    respond.prepare, against the values the deployment's tools add.)"""
    check_metadata(req.metadata)
    for i, entry in enumerate(req.context_management or ()):
        _check_context_management(entry, f"context_management[{i}]")
    if req.background and req.store is False:
        raise invalid("Background responses must be stored: 'background' requires 'store' to be true.",
                      "background", code="invalid_value")
    if req.conversation is not None:
        if req.previous_response_id is not None:
            raise APIError(400, "Mutually exclusive parameters: Ensure you are only providing one of: "
                           "'previous_response_id' or 'conversation'.", param=None,
                           code="mutually_exclusive_parameters")
        conversation_id(req.conversation)
    if req.prompt is not None:
        raise unsupported("prompt", "Reusable prompts")
    fmt = req.text.format if req.text else None
    if fmt is not None and fmt.type == "json_schema":
        if not fmt.name:
            raise APIError(400, "Missing required parameter: 'text.format.name'.", param="text.format.name",
                           code="missing_required_parameter")
        if fmt.json_schema is None:
            raise APIError(400, "Missing required parameter: 'text.format.schema'.", param="text.format.schema",
                           code="missing_required_parameter")


def _check_context_management(entry: dict[str, Any], where: str) -> None:
    if entry.get("type") != "compaction":
        raise invalid(f"Invalid value: '{entry.get('type')}'. Supported values are: 'compaction'.", f"{where}.type")
    for key in entry:
        if key not in ("type", "compact_threshold"):
            raise APIError(400, f"Unknown parameter: '{where}.{key}'.", param=f"{where}.{key}",
                           code="unknown_parameter")
    threshold = entry.get("compact_threshold")
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1):
        raise invalid(f"Invalid '{where}.compact_threshold': expected a positive integer.",
                      f"{where}.compact_threshold")


DEFAULT_COMPACT_THRESHOLD = 100_000  # estimated tokens, when `compact_threshold` is not given


def compact_threshold(req: CreateResponse) -> int | None:
    """The estimated input size above which this request compacts first; None: it never does."""
    for entry in req.context_management or ():
        return entry.get("compact_threshold") or DEFAULT_COMPACT_THRESHOLD
    return None


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a decimal",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "int_from_float": "an integer",
}


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def param_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def to_api_error(exc: ValidationError) -> APIError:
    """Turn pydantic's first error into the message OpenAI gives for the same mistake."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    kind = first["type"]
    if kind == "json_invalid":
        return APIError(
            400,
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
            "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
            code=None,
        )
    if kind == "model_type" and not first["loc"]:
        return APIError(400, "The request body must be a JSON object.", code="invalid_type")
    # A union mismatch reports one error per branch; the location before the branch name is the parameter.
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and (p.endswith("]") or p in _BRANCHES)))
    param = param_path(loc)
    if kind == "missing":
        return APIError(400, f"Missing required parameter: '{param}'.", param=param,
                        code="missing_required_parameter")
    if kind == "extra_forbidden":
        return APIError(400, f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")
    if kind in _TYPE_NAMES or kind.endswith("_type"):
        expected = " or ".join(dict.fromkeys(
            _TYPE_NAMES.get(e["type"], "a valid value") for e in errors if _same_param(e, loc)
        ))
        got = json_type(first.get("input"))
        return APIError(400, f"Invalid type for '{param}': expected {expected}, but got {got} instead.",
                        param=param, code="invalid_type")
    if kind in ("less_than_equal", "less_than", "greater_than_equal", "greater_than"):
        ctx = first.get("ctx", {})
        bound = next(iter(ctx.values()), None)
        value = first.get("input")
        noun = "decimal" if isinstance(bound, float) else "integer"
        bound = f"{bound:g}" if isinstance(bound, float) else bound
        if kind.startswith("less"):
            text = f"{noun} above maximum value. Expected a value <= {bound}"
            code = f"{noun}_above_max_value"
        else:
            text = f"{noun} below minimum value. Expected a value >= {bound}"
            code = f"{noun}_below_min_value"
        return APIError(400, f"Invalid '{param}': {text}, but got {value} instead.", param=param, code=code)
    if kind == "literal_error":
        expected = first.get("ctx", {}).get("expected", "")
        return APIError(400, f"Invalid value: '{first.get('input')}'. Supported values are: {expected}.",
                        param=param, code="invalid_value")
    return APIError(400, f"Invalid '{param}': {first['msg']}.", param=param, code="invalid_value")


_BRANCHES = {"str", "int", "float", "bool", "list[dict[str,any]]", "dict[str,any]", "function-after", "none"}


def _same_param(error: ErrorDetails, loc: tuple[Any, ...]) -> bool:
    return tuple(p for p in error["loc"] if not (isinstance(p, str) and (p.endswith("]") or p in _BRANCHES))) == loc
