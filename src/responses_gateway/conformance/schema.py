"""Validate Responses API objects against the Open Responses OpenAPI document.

The document (public repository openresponses/openresponses, ``public/openapi/openapi.json``) is not shipped:
``SpecValidator(path)`` loads a copy; the tests use the one in ``tests/data/spec/``, ``responses-gateway check``
the one named by ``--spec`` or ``$OPENRESPONSES_SPEC``. The document wins on shapes.
Real clients (the official ``openai`` SDK above all) follow what OpenAI's endpoint really sends, which differs
from the document in a few places. Every such departure lives in ``DIFFERENCES`` below and nowhere else, so a
newer copy of the document can be dropped in and the list reviewed entry by entry.

``upstream=True`` is for things OpenAI itself sent (recordings, a Responses upstream): it also tolerates the
entries marked ``upstream_only``, which the gateway's own output must not rely on.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_URI = "urn:openresponses:openapi"

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NULLABLE_STR = {"type": ["string", "null"]}


def _obj(
    required: dict[str, Any], optional: dict[str, Any] | None = None, unions: list[str] | None = None
) -> dict[str, Any]:
    """An object schema in the document's own style: extra properties stay allowed.

    ``x-gateway-union`` names the document's unions (``ItemField``, ``Tool``...) the schema is added to.
    """
    schema = {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}
    if unions:
        schema["x-gateway-union"] = list(unions)
    return schema


def _type(value: str) -> dict[str, Any]:
    return {"type": "string", "enum": [value]}


def _item_event(type_: str, **fields: Any) -> dict[str, Any]:
    return _obj(
        {"type": _type(type_), "sequence_number": _INT, "item_id": _STR, "output_index": _INT, **fields}
    )


_OUTPUT_AND_INPUT = ["ItemField", "ItemParam"]
_TOOL = ["Tool", "ResponsesToolParam"]

#: Every deliberate difference between the spec document and OpenAI's real endpoint, with its reason.
#: Keys an entry may carry besides ``why``:
#:   rename_events   OpenAI event type -> the spec's type whose schema validates it
#:   schemas         schemas the document lacks (OpenAI's shapes, following the openai SDK types); names ending
#:                   in ``StreamingEvent`` become event schemas, ``x-gateway-union`` adds items/tools to unions
#:   add_properties  properties type-checked on top of a document schema (never made required)
#:   not_required    properties the document requires but OpenAI or its clients omit
#:   upstream_only   applied only with ``upstream=True``
DIFFERENCES: dict[str, dict[str, Any]] = {
    "reasoning_text_event_names": {
        "why": "OpenAI and the openai SDK (ResponseReasoningTextDeltaEvent/DoneEvent) name the raw reasoning "
        "events response.reasoning_text.delta/.done; the document names the same payload "
        "response.reasoning.delta/.done. The checker accepts both names.",
        "rename_events": {
            "response.reasoning_text.delta": "response.reasoning.delta",
            "response.reasoning_text.done": "response.reasoning.done",
        },
    },
    "error_event_top_level_fields": {
        "why": "The document's error event nests {type, code, message, param} under `error`, and OpenAI's real "
        "stream does exactly that (error-context_length_exceeded-stream.yaml); the openai SDK's "
        "ResponseErrorEvent reads top-level code/message/param instead. The gateway sends both. The document "
        "forbids no extra property anywhere, so nothing is relaxed: the top-level copies are only type-checked.",
        "add_properties": {
            "ErrorStreamingEvent": {"code": _NULLABLE_STR, "message": _STR, "param": _NULLABLE_STR},
        },
    },
    "message_items_without_type": {
        "why": "OpenAI accepts input messages as {role, content} without `type` (the SDK's EasyInputMessage); "
        "the official SDK and every recorded request send them so. The document requires type: message "
        "(which it also gives as the default).",
        "not_required": {
            name: ["type"]
            for name in (
                "UserMessageItemParam",
                "SystemMessageItemParam",
                "DeveloperMessageItemParam",
                "AssistantMessageItemParam",
            )
        },
    },
    "custom_tool_calls": {
        "why": "The document has no custom (free-form input) tools; OpenAI defines the `custom` tool, "
        "custom_tool_call / custom_tool_call_output items and response.custom_tool_call_input.delta/.done "
        "(openai SDK: CustomTool, ResponseCustomToolCall, ResponseCustomToolCallInputDeltaEvent...).",
        "schemas": {
            "CustomTool": _obj(
                {"type": _type("custom"), "name": _STR}, {"description": _NULLABLE_STR}, _TOOL
            ),
            "CustomToolCall": _obj(
                {"type": _type("custom_tool_call"), "call_id": _STR, "name": _STR, "input": _STR},
                {"id": _STR},
                _OUTPUT_AND_INPUT,
            ),
            "CustomToolCallOutput": _obj(
                {
                    "type": _type("custom_tool_call_output"),
                    "call_id": _STR,
                    "output": {"type": ["string", "array"]},
                },
                {"id": _STR},
                ["ItemParam"],
            ),
            "CustomToolCallInputDeltaStreamingEvent": _item_event(
                "response.custom_tool_call_input.delta", delta=_STR
            ),
            "CustomToolCallInputDoneStreamingEvent": _item_event(
                "response.custom_tool_call_input.done", input=_STR
            ),
        },
    },
    "mcp": {
        "why": "The document has no MCP shapes; OpenAI defines the `mcp` tool, mcp_call / mcp_list_tools / "
        "mcp_approval_request items (+ mcp_approval_response input) and the response.mcp_call.*, "
        "response.mcp_call_arguments.*, response.mcp_list_tools.* events (openai SDK: McpCall, McpListTools, "
        "ResponseMcpCall*Event...). mcp_call.error is a string in OpenAI's reference and older SDKs but an "
        "object ({type, code, message}) in openai>=3, so both are accepted.",
        "schemas": {
            "McpTool": _obj({"type": _type("mcp"), "server_label": _STR}, {"server_url": _STR}, _TOOL),
            "McpCall": _obj(
                {
                    "type": _type("mcp_call"),
                    "id": _STR,
                    "server_label": _STR,
                    "name": _STR,
                    "arguments": _STR,
                },
                {
                    "status": {"enum": ["in_progress", "completed", "incomplete", "calling", "failed"]},
                    "output": _NULLABLE_STR,
                    "error": {"type": ["string", "object", "null"]},
                    "approval_request_id": _NULLABLE_STR,
                },
                _OUTPUT_AND_INPUT,
            ),
            "McpListTools": _obj(
                {
                    "type": _type("mcp_list_tools"),
                    "id": _STR,
                    "server_label": _STR,
                    "tools": {
                        "type": "array",
                        "items": _obj({"name": _STR, "input_schema": {}}, {"description": _NULLABLE_STR}),
                    },
                },
                {"error": _NULLABLE_STR},
                _OUTPUT_AND_INPUT,
            ),
            "McpApprovalRequest": _obj(
                {
                    "type": _type("mcp_approval_request"),
                    "id": _STR,
                    "server_label": _STR,
                    "name": _STR,
                    "arguments": _STR,
                },
                unions=_OUTPUT_AND_INPUT,
            ),
            "McpApprovalResponse": _obj(
                {
                    "type": _type("mcp_approval_response"),
                    "approval_request_id": _STR,
                    "approve": {"type": "boolean"},
                },
                {"id": _NULLABLE_STR, "reason": _NULLABLE_STR},
                ["ItemParam"],
            ),
            "McpCallArgumentsDeltaStreamingEvent": _item_event(
                "response.mcp_call_arguments.delta", delta=_STR
            ),
            "McpCallArgumentsDoneStreamingEvent": _item_event(
                "response.mcp_call_arguments.done", arguments=_STR
            ),
            **{
                f"Mcp{kind}{state}StreamingEvent": _item_event(f"response.{event}.{status}")
                for kind, event in (("Call", "mcp_call"), ("ListTools", "mcp_list_tools"))
                for state, status in (
                    ("InProgress", "in_progress"),
                    ("Completed", "completed"),
                    ("Failed", "failed"),
                )
            },
        },
    },
    "web_search": {
        "why": "The document has no web search shapes; OpenAI defines the `web_search` tool (and "
        "web_search_preview, dated aliases), web_search_call items whose `action` is search / open_page / "
        "find_in_page, and the response.web_search_call.in_progress / .searching / .completed events (openai SDK: "
        "WebSearchTool, WebSearchPreviewTool, ResponseFunctionWebSearch, ResponseWebSearchCall*Event; "
        "recordings/openai_builtin_tools/builtin-tool-web_search-*.yaml).",
        "schemas": {
            "WebSearchTool": _obj(
                {"type": {"enum": ["web_search", "web_search_2025_08_26", "web_search_preview",
                                   "web_search_preview_2025_03_11"]}},
                {"search_context_size": {"enum": ["low", "medium", "high", None]},
                 "user_location": {"type": ["object", "null"]}, "filters": {"type": ["object", "null"]},
                 "external_web_access": {"type": ["boolean", "null"]}},
                _TOOL,
            ),
            "WebSearchCall": _obj(
                {"type": _type("web_search_call"), "id": _STR,
                 "status": {"enum": ["in_progress", "searching", "completed", "failed", "incomplete"]}},
                {"action": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {
                        "type": {"enum": ["search", "open_page", "find_in_page"]},
                        "query": _NULLABLE_STR,
                        "queries": {"type": ["array", "null"], "items": _STR},
                        "url": _NULLABLE_STR,
                        "pattern": _STR,
                        "sources": {"type": ["array", "null"], "items": _obj({"type": _type("url"), "url": _STR})},
                    },
                }},
                _OUTPUT_AND_INPUT,
            ),
            **{
                f"WebSearchCall{state}StreamingEvent": _item_event(f"response.web_search_call.{status}")
                for state, status in (("InProgress", "in_progress"), ("Searching", "searching"),
                                      ("Completed", "completed"))
            },
        },
    },
    "hosted_tool_choice": {
        "why": "The document's response tool_choice has no hosted-tool form; OpenAI echoes the one a request "
        "gave, e.g. {\"type\": \"web_search_preview\"} (openai SDK: ToolChoiceTypes, ToolChoiceMcp).",
        "schemas": {
            "HostedToolChoice": _obj({"type": {"enum": [
                "file_search", "web_search", "web_search_2025_08_26", "web_search_preview",
                "web_search_preview_2025_03_11", "code_interpreter", "image_generation", "computer_use_preview",
                "computer", "mcp"]}}),
        },
        "add_properties": {"ResponseResource": {"tool_choice": {"oneOf": [
            {"$ref": "#/components/schemas/FunctionToolChoice"}, {"$ref": "#/components/schemas/ToolChoiceValueEnum"},
            {"$ref": "#/components/schemas/AllowedToolChoice"}, {"$ref": "#/components/schemas/HostedToolChoice"},
        ]}}},
    },
    "code_interpreter": {
        "why": "The document has no code interpreter shapes; OpenAI defines the `code_interpreter` tool (its "
        "container an id or {type: auto, file_ids, memory_limit}), code_interpreter_call items whose `outputs` "
        "(logs, image) are null unless include asks for them, the response.code_interpreter_call.in_progress/"
        "interpreting/completed and response.code_interpreter_call_code.delta/.done events, and "
        "container_file_citation annotations (openai SDK: CodeInterpreter, ResponseCodeInterpreterToolCall, "
        "ResponseCodeInterpreterCall*Event, AnnotationContainerFileCitation; recordings "
        "builtin-tool-code_interpreter-*.yaml).",
        "schemas": {
            "CodeInterpreterTool": _obj(
                {"type": _type("code_interpreter"), "container": {"type": ["string", "object"]}}, unions=_TOOL
            ),
            "CodeInterpreterCall": _obj(
                {
                    "type": _type("code_interpreter_call"),
                    "id": _STR,
                    "container_id": _STR,
                    "status": {"enum": ["in_progress", "completed", "incomplete", "interpreting", "failed"]},
                },
                {
                    "code": _NULLABLE_STR,
                    "outputs": {
                        "type": ["array", "null"],
                        "items": {
                            "oneOf": [
                                _obj({"type": _type("logs"), "logs": _STR}),
                                _obj({"type": _type("image"), "url": _STR}),
                            ]
                        },
                    },
                },
                _OUTPUT_AND_INPUT,
            ),
            "ContainerFileCitation": _obj(
                {
                    "type": _type("container_file_citation"),
                    "container_id": _STR,
                    "file_id": _STR,
                    "filename": _STR,
                    "start_index": _INT,
                    "end_index": _INT,
                },
                unions=["Annotation"],
            ),
            "CodeInterpreterCallCodeDeltaStreamingEvent": _item_event(
                "response.code_interpreter_call_code.delta", delta=_STR
            ),
            "CodeInterpreterCallCodeDoneStreamingEvent": _item_event(
                "response.code_interpreter_call_code.done", code=_STR
            ),
            **{
                f"CodeInterpreterCall{state}StreamingEvent": _item_event(f"response.code_interpreter_call.{status}")
                for state, status in (
                    ("InProgress", "in_progress"),
                    ("Interpreting", "interpreting"),
                    ("Completed", "completed"),
                )
            },
        },
    },
    "file_search": {
        "why": "The document has no file_search shapes; OpenAI defines the `file_search` tool, file_search_call "
        "items ({id, queries, status, results}), the response.file_search_call.in_progress/.searching/.completed "
        "events and `file_citation` annotations ({file_id, filename, index}) (openai SDK: FileSearchTool, "
        "ResponseFileSearchToolCall, ResponseFileSearchCall*Event, AnnotationFileCitation).",
        "schemas": {
            "FileSearchTool": _obj({"type": _type("file_search"), "vector_store_ids": {"type": "array",
                                                                                      "items": _STR}},
                                   {"max_num_results": _INT, "filters": {"type": ["object", "null"]},
                                    "ranking_options": {"type": ["object", "null"]}}, _TOOL),
            "FileSearchCall": _obj(
                {"type": _type("file_search_call"), "id": _STR, "queries": {"type": "array", "items": _STR},
                 "status": {"enum": ["in_progress", "searching", "completed", "incomplete", "failed"]}},
                {"results": {"type": ["array", "null"], "items": _obj(
                    {}, {"file_id": _NULLABLE_STR, "filename": _NULLABLE_STR, "text": _NULLABLE_STR,
                         "score": {"type": ["number", "null"]}, "attributes": {"type": ["object", "null"]}})}},
                _OUTPUT_AND_INPUT,
            ),
            "FileCitationBody": _obj({"type": _type("file_citation"), "file_id": _STR, "filename": _STR,
                                      "index": _INT}, unions=["Annotation"]),
            **{
                f"FileSearchCall{state}StreamingEvent": _item_event(f"response.file_search_call.{status}")
                for state, status in (("InProgress", "in_progress"), ("Searching", "searching"),
                                      ("Completed", "completed"))
            },
        },
    },
    "image_generation": {
        "why": "The document has no image generation shapes; OpenAI defines the `image_generation` tool (model, "
        "size, quality, output_format, output_compression, background, moderation, partial_images, input_fidelity, "
        "input_image_mask, action), image_generation_call items ({id, status, result: base64, revised_prompt, and "
        "the size, quality, output_format, background and action used; `error` when it failed}) and the "
        "response.image_generation_call.in_progress / .generating / .partial_image / .completed events (openai SDK: "
        "ImageGeneration, ImageGenerationCall, ResponseImageGenCall*Event).",
        "schemas": {
            "ImageGenerationTool": _obj(
                {"type": _type("image_generation")},
                {"action": {"enum": ["generate", "edit", "auto"]}, "model": _STR,
                 "background": {"enum": ["transparent", "opaque", "auto"]},
                 "input_fidelity": {"enum": ["high", "low"]}, "moderation": {"enum": ["auto", "low"]},
                 "output_compression": _INT, "output_format": {"enum": ["png", "webp", "jpeg", "gif", "svg"]},
                 "partial_images": _INT, "quality": {"enum": ["low", "medium", "high", "xhigh", "max", "auto"]},
                 "size": _STR, "input_image_mask": {"type": "object"}},
                _TOOL,
            ),
            "ImageGenerationCall": _obj(
                {"type": _type("image_generation_call"), "id": _STR,
                 "status": {"enum": ["in_progress", "completed", "generating", "failed"]}},
                {"result": _NULLABLE_STR, "revised_prompt": _NULLABLE_STR, "size": _NULLABLE_STR,
                 "action": {"enum": ["generate", "edit", "auto", None]},
                 "background": {"enum": ["transparent", "opaque", "auto", None]},
                 "output_format": {"enum": ["png", "webp", "jpeg", "gif", "svg", None]},
                 "quality": {"enum": ["low", "medium", "high", "xhigh", "max", "auto", None]},
                 "error": {"type": ["object", "null"], "required": ["message", "type"],
                           "properties": {"message": _STR, "type": _STR, "code": _NULLABLE_STR,
                                          "param": _NULLABLE_STR}}},
                _OUTPUT_AND_INPUT,
            ),
            **{
                f"ImageGenerationCall{state}StreamingEvent": _item_event(f"response.image_generation_call.{status}")
                for state, status in (("InProgress", "in_progress"), ("Generating", "generating"),
                                      ("Completed", "completed"))
            },
            "ImageGenerationCallPartialImageStreamingEvent": _item_event(
                "response.image_generation_call.partial_image", partial_image_b64=_STR, partial_image_index=_INT
            ),
        },
    },
    "computer_use": {
        "why": "The document has no computer use shapes; OpenAI defines the `computer_use_preview` tool (display "
        "size and environment) and the `computer` tool, computer_call items ({id, call_id, action or actions, "
        "pending_safety_checks, status}; streamed whole: output_item.added with the action, then .done, no events "
        "of their own) and the client's computer_call_output input items ({call_id, output: a computer_screenshot "
        "with image_url or file_id, acknowledged_safety_checks}) (openai SDK: ComputerUsePreviewTool, "
        "ComputerTool, ResponseComputerToolCall, ResponseComputerToolCallOutputItem, ComputerAction).",
        "schemas": {
            "ComputerUsePreviewTool": _obj(
                {"type": _type("computer_use_preview"), "display_width": _INT, "display_height": _INT,
                 "environment": {"enum": ["windows", "mac", "linux", "ubuntu", "browser"]}},
                unions=_TOOL,
            ),
            "ComputerTool": _obj({"type": _type("computer")}, unions=_TOOL),
            "ComputerCall": _obj(
                {"type": _type("computer_call"), "id": _STR, "call_id": _STR,
                 "pending_safety_checks": {"type": "array", "items": _obj({"id": _STR}, {
                     "code": _NULLABLE_STR, "message": _NULLABLE_STR})},
                 "status": {"enum": ["in_progress", "completed", "incomplete"]}},
                {"action": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/ComputerAction"}]},
                 "actions": {"type": ["array", "null"], "items": {"$ref": "#/components/schemas/ComputerAction"}}},
                _OUTPUT_AND_INPUT,
            ),
            "ComputerAction": _obj({"type": {"enum": ["click", "double_click", "drag", "keypress", "move",
                                                      "screenshot", "scroll", "type", "wait"]}},
                                   {"x": _INT, "y": _INT, "button": {"enum": ["left", "right", "wheel", "back",
                                                                              "forward"]},
                                    "keys": {"type": ["array", "null"], "items": _STR}, "text": _STR,
                                    "scroll_x": _INT, "scroll_y": _INT,
                                    "path": {"type": "array", "items": _obj({"x": _INT, "y": _INT})}}),
            "ComputerCallOutput": _obj(
                {"type": _type("computer_call_output"), "call_id": _STR,
                 "output": _obj({"type": _type("computer_screenshot")},
                                {"image_url": _NULLABLE_STR, "file_id": _NULLABLE_STR})},
                {"id": _STR, "status": {"enum": ["in_progress", "completed", "incomplete", "failed"]},
                 "acknowledged_safety_checks": {"type": ["array", "null"], "items": _obj({"id": _STR})}},
                ["ItemParam"],
            ),
        },
    },
    "tool_search_and_namespaces": {
        "why": "The document has no tool search or namespaced tools; OpenAI (and Codex) use `namespace` tool "
        "groups, a client-executed `tool_search` tool, tool_search_call output items whose `arguments` is an "
        "object, tool_search_output input items, and a `namespace` field on function/custom calls "
        "(openai SDK: NamespaceTool, ToolSearchTool, ResponseToolSearchCall, ResponseToolSearchOutputItem).",
        "schemas": {
            "NamespaceTool": _obj(
                {"type": _type("namespace"), "name": _STR, "tools": {"type": "array"}},
                {"description": _NULLABLE_STR},
                _TOOL,
            ),
            "ToolSearchTool": _obj(
                {"type": _type("tool_search")},
                {"execution": {"enum": ["client", "server"]}, "description": _NULLABLE_STR},
                _TOOL,
            ),
            "ToolSearchCall": _obj(
                {"type": _type("tool_search_call"), "call_id": _STR, "arguments": {"type": "object"}},
                {"id": _STR, "execution": {"enum": ["client", "server"]},
                 "status": {"enum": ["in_progress", "completed", "incomplete"]}},
                _OUTPUT_AND_INPUT,
            ),
            "ToolSearchOutput": _obj(
                {"type": _type("tool_search_output"), "call_id": _STR, "tools": {"type": "array"}},
                {"id": _STR, "execution": {"enum": ["client", "server"]}},
                ["ItemParam"],
            ),
        },
        "add_properties": {"FunctionCall": {"namespace": _STR}},
    },
    "json_schema_format_echo": {
        "why": "The document types the echoed text.format.schema of a json_schema format as null; OpenAI echoes "
        "the JSON schema the request gave (an object), and clients read it back.",
        "add_properties": {"JsonSchemaResponseFormat": {"schema": {"type": ["object", "null"]}}},
    },
    "response_penalties_missing_upstream": {
        "why": "OpenAI responses recorded before mid-January 2026 (text-single*.yaml) lack presence_penalty and "
        "frequency_penalty, which the document requires; later recordings carry them. Tolerated for upstream "
        "data only: the gateway itself must send them.",
        "upstream_only": True,
        "not_required": {"ResponseResource": ["presence_penalty", "frequency_penalty"]},
    },
}

RENAMED_EVENTS: dict[str, str] = {
    old: new for diff in DIFFERENCES.values() for old, new in diff.get("rename_events", {}).items()
}


def _branch_ruled_out(error: ValidationError) -> bool:
    return error.validator in ("type", "enum") and list(error.relative_path) in ([], ["type"])


def _explain(error: ValidationError) -> ValidationError:
    """Descend into the union branch whose ``type`` matched, as an OpenAPI discriminator would.

    Without this a wrong item only says "is not valid under any of the given schemas".
    """
    while error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        left = [errors for errors in branches.values() if not any(map(_branch_ruled_out, errors))]
        if len(left) != 1:
            break
        # best_match would itself descend into a lone union error, past the branch we are choosing
        error = left[0][0] if len(left[0]) == 1 else best_match(left[0])
    return error


class SpecValidator:
    """The document at ``path`` with DIFFERENCES applied; each method raises jsonschema.ValidationError."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @functools.cache  # noqa: B019 - a handful of validators live for the whole process
    def _spec(self, upstream: bool) -> tuple[Registry, dict[str, str]]:
        """The document with DIFFERENCES applied, and event type -> schema name."""
        doc = json.loads(self.path.read_text())
        schemas = doc["components"]["schemas"]
        for diff in DIFFERENCES.values():
            if diff.get("upstream_only") and not upstream:
                continue
            for name, fields in diff.get("not_required", {}).items():
                schemas[name]["required"] = [f for f in schemas[name]["required"] if f not in fields]
            for name, props in diff.get("add_properties", {}).items():
                schemas[name]["properties"].update(props)
            for name, schema in diff.get("schemas", {}).items():
                assert name not in schemas, f"{name} now exists in the spec document: review DIFFERENCES"
                schemas[name] = schema
                for union in schema.get("x-gateway-union", []):
                    if "oneOf" not in schemas[union]:
                        schemas[union] = {"oneOf": [schemas[union]]}
                    schemas[union]["oneOf"].append({"$ref": f"#/components/schemas/{name}"})

        events: dict[str, str] = {}
        for name, schema in schemas.items():
            if name.endswith("StreamingEvent"):
                (type_,) = schema["properties"]["type"]["enum"]
                assert type_ not in events, f"two schemas for {type_}: {events[type_]}, {name}"
                events[type_] = name
        for old, new in RENAMED_EVENTS.items():
            assert old not in events, f"{old} now exists in the spec document: review DIFFERENCES"
            events[old] = events[new]

        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        return Registry().with_resource(SPEC_URI, resource), events

    @functools.cache  # noqa: B019
    def _validator(self, name: str, upstream: bool) -> Draft202012Validator:
        registry, _ = self._spec(upstream)
        return Draft202012Validator({"$ref": f"{SPEC_URI}#/components/schemas/{name}"}, registry=registry)

    def _check(self, name: str, instance: Any, what: str, upstream: bool) -> None:
        errors = list(self._validator(name, upstream).iter_errors(instance))
        error = errors[0] if len(errors) == 1 else best_match(errors)  # best_match alone descends too far
        if error is not None:
            error = _explain(error)
            error.message = f"{what} does not match {name} at {error.json_path}: {error.message}"
            raise error

    def event_types(self) -> frozenset[str]:
        """Every event type validate_event knows, OpenAI's renamed ones included."""
        return frozenset(self._spec(False)[1])

    def validate_event(self, event: dict[str, Any], *, upstream: bool = False) -> None:
        """Raise unless ``event`` matches the schema of its ``type``."""
        type_ = event.get("type") if isinstance(event, dict) else None
        name = self._spec(upstream)[1].get(type_) if isinstance(type_, str) else None
        if name is None:
            raise ValidationError(f"no schema for event type {type_!r}")
        if type_ in RENAMED_EVENTS:
            event = {**event, "type": RENAMED_EVENTS[type_]}
        self._check(name, event, f"event #{event.get('sequence_number')} {type_}", upstream)

    def validate_response(self, obj: dict[str, Any], *, upstream: bool = False) -> None:
        """Raise unless ``obj`` is a ResponseResource."""
        self._check("ResponseResource", obj, "response", upstream)

    def validate_ws_error(self, frame: dict[str, Any]) -> None:
        """Raise jsonschema.ValidationError unless ``frame`` is a WebSocketErrorEvent (WebSocket mode's error)."""
        self._check("WebSocketErrorEvent", frame, "WebSocket error frame", upstream=False)

    def validate_request(self, body: dict[str, Any]) -> None:
        """Raise unless ``body`` is a CreateResponseBody."""
        self._check("CreateResponseBody", body, "request", upstream=False)
