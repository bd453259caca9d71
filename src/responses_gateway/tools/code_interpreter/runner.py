"""One response's code_interpreter calls, in the tool loop (tools/loop.py).

Before the first step the response's container is settled: the declared container id (it must be the key's
and running), or, for `auto`, the container of the latest `code_interpreter_call` in the history if it is
still running (as OpenAI reuses an active container from the model's context), else a new one — created
when the model first runs code, with the declaration's `file_ids` and `memory_limit`.

A call streams as OpenAI's do: `output_item.added` (`code: ""`, the container id), `.in_progress`, the code
deltas as the model writes it, `_code.done`, `.interpreting`, then `.completed` and the item with its
`outputs` — the logs (stdout and stderr in order, a traceback if the code raised), the value of the last
expression, an `image` per matplotlib figure (the URL of the container file), and what the model should
know besides (a file too large to keep). Code that raised is a completed call (the model reads the
traceback); a call stopped by a limit (time, output, disk, CPU) is `incomplete`; one whose interpreter died
(memory) or could not run is `failed` — its logs say why, and the model reads them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ...errors import APIError
from ...generation import ToolCallStart
from ...ids import new_id
from ...protocol.tools import ToolSet
from ..frame import Annotator, Calls, Context, Events, Item, OpenItem, Spec
from .annotate import Citations
from .channel import GRACE
from .declaration import OUTPUTS, Container
from .registry import Outcome, Registry
from .service import CodeInterpreter


class CodeRunner:
    def __init__(self, declared: Container, context: Context[CodeInterpreter]):
        self.declared = declared
        self.context = context
        self.owner = context.owner
        self.service: CodeInterpreter = context.service
        self.registry: Registry = self.service.registry
        limits = self.registry.options.limits
        self.timeout = limits.timeout + GRACE + limits.start_timeout + 30  # the loop's deadline for one call
        self.with_outputs = OUTPUTS in context.include
        self.container_id = ""
        self.created = False  # the container exists (else: `auto`, made at the first call)
        self.problem: str | None = None  # why calls cannot run (an unknown container...)
        self.files: dict[str, str] = {}  # /mnt/data path -> container file id, for citations

    # -- before the first step -----------------------------------------------------------------------------

    async def prelude(self, calls: Calls, tools: ToolSet) -> AsyncIterator[Events]:
        declared = self.declared
        try:
            if declared.id is not None:
                await self.registry.usable(self.owner, declared.id)
                self.container_id, self.created = declared.id, True
            else:
                self.registry.memory_limit(declared.memory_limit, "tools.container.memory_limit")
                earlier = _latest_container(self.context.history)
                row = await self.registry.get(self.owner, earlier) if earlier else None
                if row is not None and row["status"] == "running":
                    self.container_id, self.created = row["id"], True
                else:
                    self.container_id = new_id("cntr")
        except APIError as exc:
            self.problem = exc.message
            self.container_id = declared.id or ""
        if self.created:
            for stored in await self.registry.store.all_container_files(self.container_id):
                self.files[stored["path"]] = stored["id"]
        return
        yield

    # -- the model's calls -----------------------------------------------------------------------------------

    def item(self, start: ToolCallStart) -> Item:
        return {"id": new_id("ci"), "type": "code_interpreter_call", "status": "in_progress", "code": "",
                "container_id": self.container_id, "outputs": [] if self.with_outputs else None}

    def added(self, call: OpenItem) -> list[Spec]:
        return [("response.code_interpreter_call.in_progress", {})]

    def delta(self, call: OpenItem, text: str) -> list[Spec]:
        return [("response.code_interpreter_call_code.delta", {"delta": text})]

    def complete(self, call: OpenItem) -> tuple[list[Spec], bool]:
        code = call.arguments
        call.item["code"] = code
        return [("response.code_interpreter_call_code.done", {"code": code})], True

    async def run(self, call: OpenItem, calls: Calls) -> AsyncIterator[Events]:
        yield calls.call_events(call, [("response.code_interpreter_call.interpreting", {})])
        if self.problem is not None:
            yield calls.fail_call(call, self.problem)
            return
        try:
            if not self.created:
                await self._create()
            outcome = await self.registry.run(self.owner, self.container_id, call.item["code"] or "")
        except APIError as exc:
            yield calls.fail_call(call, exc.message)
            return
        for stored in outcome.files:
            self.files[stored["path"]] = stored["id"]
        call.item["outputs"] = self._outputs(outcome)
        result = outcome.result
        if result.kind in ("ok", "error"):
            yield calls.end_call(call, "completed", [("response.code_interpreter_call.completed", {})])
        else:  # stopped by a limit: incomplete, the state kept; the interpreter died: failed
            yield calls.end_call(call, "failed" if result.restarted else "incomplete")

    def failed(self, call: OpenItem, message: str) -> tuple[str | None, list[Spec]]:
        call.item["outputs"] = [{"type": "logs", "logs": message}]
        return "failed", []

    def annotator(self) -> Annotator | None:
        return Citations(self._cited)

    async def aclose(self) -> None:
        pass

    # -- helpers ---------------------------------------------------------------------------------------------

    async def _create(self) -> None:
        declared = self.declared
        uploads = await self.service.uploads(self.owner, declared.file_ids)
        limit = self.registry.memory_limit(declared.memory_limit, "tools.container.memory_limit")
        await self.registry.create(self.owner, name=f"code_interpreter {self.container_id[-8:]}",
                                   memory_limit=limit, uploads=uploads, container_id=self.container_id)
        self.created = True
        for stored in await self.registry.store.all_container_files(self.container_id):
            self.files[stored["path"]] = stored["id"]

    def _outputs(self, outcome: Outcome) -> list[dict[str, Any]]:
        result = outcome.result
        outputs: list[dict[str, Any]] = []
        if result.logs:
            outputs.append({"type": "logs", "logs": result.logs})
        if result.value is not None:
            value = result.value
            limit = self.registry.options.limits.output_bytes
            if len(value) > limit:
                value = value[:limit] + f"\n[... value truncated: {len(result.value) - limit:,} more characters ...]"
            outputs.append({"type": "logs", "logs": value})
        for image in outcome.images:
            outputs.append({"type": "image", "url": self.service.file_url(outcome.container_id, image["id"])})
        if outcome.notes:
            outputs.append({"type": "logs", "logs": "\n".join(outcome.notes)})
        return outputs

    def _cited(self, path: str) -> tuple[str, str] | None:
        file_id = self.files.get(path)
        return (self.container_id, file_id) if file_id else None


def _latest_container(history: list[Item]) -> str | None:
    for item in reversed(history):
        if item.get("type") == "code_interpreter_call" and isinstance(item.get("container_id"), str):
            return str(item["container_id"])
    return None
