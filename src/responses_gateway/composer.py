"""The composer: the one state machine that turns generation events into Responses events.

It owns ids, output_index / content_index, sequence_number, the .added/.delta/.done pairing and the one
terminal event. Nothing else in the gateway builds Responses events. Event dicts are built directly (no
model validation per token) and encoded once by the sink.

Gateway-run tools (tools/frame.py) take part through the composer's tool half (tools/calls.py): a runner is
given only `Calls` — `call_events`, `end_call`, `fail_call`, `add_item` — and never touches the composer's
state: a tool says what its item looks like and which events of its own it wants; the composer numbers and
orders.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from . import generation as g
from .ids import new_id
from .protocol.reasoning import seal
from .tools.calls import ToolCalls
from .tools.frame import OpenItem, Runner, WholeCalls

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}

# `response.error.code` is a closed set in OpenAI's API (the SDKs type it so); the precise code stays on
# the `error` event. OpenAI itself also sends context_length_exceeded there.
RESPONSE_ERROR_CODES = {
    "server_error", "rate_limit_exceeded", "invalid_prompt", "context_length_exceeded", "vector_store_timeout",
    "invalid_image", "invalid_image_format", "invalid_base64_image", "invalid_image_url", "image_too_large",
    "image_too_small", "image_parse_error", "image_content_policy_violation", "invalid_image_mode",
    "image_file_too_large", "unsupported_image_media_type", "empty_image_file", "failed_to_download_image",
    "image_file_not_found",
}


def response_error_code(code: str | None) -> str:
    if code in RESPONSE_ERROR_CODES:
        return code
    if code in ("rate_limit_error", "requests", "tokens"):
        return "rate_limit_exceeded"
    return "server_error"


class Composer(ToolCalls):
    def __init__(self, response: dict[str, Any], *, logprobs: bool = False, encrypted_reasoning: bool = False,
                 reasoning_summary: bool = False):
        self.response = response
        self.want_logprobs = logprobs
        self.encrypted_reasoning = encrypted_reasoning
        # With `reasoning.summary` requested, the reasoning streams as a summary part (clients such as the
        # Vercel AI SDK show only summaries); otherwise as raw `reasoning_text` content, as OpenAI does.
        self.reasoning_part = "summary_text" if reasoning_summary else "reasoning_text"
        self.seq = 0
        self.output: list[dict[str, Any]] = []  # the items in full, as stored (`final` shows what `shown` lets)
        self.text_item: OpenItem | None = None  # the open message or reasoning item
        self.calls: dict[int | str, OpenItem] = {}  # upstream key -> open tool-call item
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.closed = False
        self.sealed: dict[str, str] = {}  # reasoning item id -> encrypted content kept for storage only
        self.captured: list[str] | None = None  # a compaction summary being written (see capture)
        self.init_tools()  # gateway-run tools of this response: runners, annotators, pending calls (tools/calls.py)

    # -- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    def resume(cls, response: dict[str, Any], seq: int) -> Composer:
        """A composer for a stored, unfinished response whose own composer is gone (its replica died):
        events continue at sequence number `seq`."""
        composer = cls(response)
        composer.seq = seq
        return composer

    @staticmethod
    def replay_end(response: dict[str, Any], seq: int) -> list[dict[str, Any]]:
        """The terminal event of a stored, finished response, for a follower whose event log lacks it."""
        status = response["status"]
        kind = "incomplete" if status == "cancelled" else status
        return [{"type": f"response.{kind}", "sequence_number": seq, "response": response}]

    def start(self) -> list[dict[str, Any]]:
        """`response.created` with the skeleton's status (`queued` for a background response), then
        `response.in_progress`."""
        created = self._lifecycle("response.created")
        self.response["status"] = "in_progress"
        return [created, self._lifecycle("response.in_progress")]

    def feed(self, events: g.Batch) -> list[dict[str, Any]]:
        if self.captured is not None:
            return self._capture(events)
        out: list[dict[str, Any]] = []
        ev: Any  # dispatched on its exact type below (cheaper per token than isinstance narrowing)
        for ev in events:
            kind = type(ev)
            if kind is g.TextDelta:
                text = ev.text
                item = self.text_item
                if item is not None and item.part == "output_text" and text and not ev.logprobs \
                        and not self.annotators:
                    # most tokens: more text for the open output_text part (what _text does, inline)
                    item.buf.append(text)
                    seq = self.seq
                    self.seq = seq + 1
                    out.append({"type": "response.output_text.delta", "sequence_number": seq, "item_id": item.id,
                                "output_index": item.index, "content_index": len(item.item["content"]),
                                "delta": text, "logprobs": []})
                elif text:
                    self._text(out, "output_text", text, ev.logprobs)
            elif kind is g.ReasoningDelta:
                self._reasoning(out, ev)
            elif kind is g.ToolCallDelta:
                call = self.calls.get(ev.key)
                if call is not None and ev.text:
                    call.buf.append(ev.text)
                    if call.runner is not None:
                        self.send_specs(out, call, call.runner.delta(call, ev.text))
                    elif call.kind != "tool_search":  # tool_search: the arguments arrive whole in .done
                        out.append({
                            "type": _ARGS_DELTA[call.kind], "sequence_number": self._next(),
                            "item_id": call.id, "output_index": call.index, "delta": ev.text,
                        })
            elif kind is g.ToolCallStart:
                self._start_call(out, ev)
            elif kind is g.RefusalDelta:
                if ev.text:
                    self._text(out, "refusal", ev.text, None)
            elif kind is g.Usage:
                self._usage(ev)
            elif kind is g.ItemEnd:
                self.close_text(out, "completed")
            elif kind is g.Finish:
                self.finish_reason = ev.reason
                self._close_all(out, "incomplete" if ev.reason in INCOMPLETE_REASONS else "completed")
        return out

    def finish(self, incomplete: str | None = None) -> list[dict[str, Any]]:
        """The upstream ended cleanly: close what is open and emit the terminal event.

        `incomplete`: a reason the gateway itself stopped short (e.g. the tool-round cap)."""
        out: list[dict[str, Any]] = []
        reason = incomplete or INCOMPLETE_REASONS.get(self.finish_reason or "")
        self._close_all(out, "incomplete" if reason else "completed")
        if reason:
            self._terminal(out, "incomplete", incomplete_details={"reason": reason})
        else:
            self._terminal(out, "completed", completed_at=int(time.time()))
        return out

    def fail(self, code: str | None, message: str, *, type: str = "server_error",
             param: str | None = None) -> list[dict[str, Any]]:
        """Any failure after the stream started: close open items as incomplete, `error`, `response.failed`."""
        out: list[dict[str, Any]] = []
        if self.closed:
            return out
        self._close_all(out, "incomplete")
        error = {"type": type, "code": code, "message": message, "param": param}
        # OpenAI nests the error; the openai SDKs read the top-level copies. Both are sent.
        out.append({"type": "error", "sequence_number": self._next(), "code": code, "message": message,
                    "param": param, "error": error})
        self._terminal(out, "failed", error={"code": response_error_code(code), "message": message})
        return out

    def unstored(self, events: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
        """The store refused the finished response: its terminal event (the last of `events`) is withdrawn
        before it was sent, and the response fails instead — a client must never be told `completed` about a
        response it cannot retrieve or chain from. The output items keep their own status."""
        terminal = events[-1]
        self.seq = terminal["sequence_number"]
        self.closed = False
        for field in ("completed_at", "incomplete_details"):
            self.response[field] = None
        return events[:-1] + self.fail("storage_error", message)

    def cancel(self) -> list[dict[str, Any]]:
        """A background response cancelled by its owner: open items close as incomplete; status `cancelled`.

        OpenAI has no `response.cancelled` event (the SDKs' event unions lack one), so the terminal event is
        `response.incomplete` whose response has status `cancelled` and no `incomplete_details`: typed
        clients parse it, and every reader sees the stream end (docs/background.md)."""
        out: list[dict[str, Any]] = []
        if self.closed:
            return out
        self._close_all(out, "incomplete")
        self._terminal(out, "cancelled")
        out[-1]["type"] = "response.incomplete"
        return out

    @property
    def final(self) -> dict[str, Any]:
        return self.response

    def stored(self) -> dict[str, Any]:
        """The final response as it is stored: every item in full (what a gateway-run tool shows a client only
        when `include` asks), with the encrypted reasoning the client did not ask to see — less what a tool keeps
        apart in the store (`keep`)."""
        kept = self.kept
        if not self.sealed and kept is None and self.response["output"] is self.output:
            return self.response
        sealed = self.sealed
        output = [{**item, "encrypted_content": sealed[item["id"]]} if item.get("id") in sealed else item
                  for item in self.output]
        if kept is not None:  # a gateway-run tool keeping part of its items apart (an image in the files store)
            output = [kept(item) for item in output]
        return {**self.response, "output": output}

    # -- compaction: a summary written by the upstream, emitted as one sealed item -----------------------

    def capture(self) -> None:
        """From now on the upstream writes a summary: its text is kept (`captured`), nothing is streamed."""
        self.captured = []

    def _capture(self, events: g.Batch) -> list[dict[str, Any]]:
        captured = self.captured
        if captured is None:
            return self.feed(events)
        ev: Any
        for ev in events:
            kind = type(ev)
            if kind is g.TextDelta:
                captured.append(ev.text)
            elif kind is g.Usage:
                self._usage(ev)
            elif kind is g.Finish:
                self.finish_reason = ev.reason
        return []  # reasoning, and tool calls the summary step did not ask for, are not part of a summary

    def compaction(self, encrypted_content: str) -> list[dict[str, Any]]:
        """End the capture: the compaction output item, whole. The next step starts afresh."""
        self.captured = None
        self.finish_reason = None
        out: list[dict[str, Any]] = []
        item = self.open_item(out, "compaction", {"id": new_id("cmp"), "type": "compaction",
                                                  "encrypted_content": encrypted_content})
        out.append({"type": "response.output_item.done", "sequence_number": self._next(),
                    "output_index": item.index, "item": item.item})
        return out

    # -- a response of several upstream steps (gateway-run tools: tools/calls.py) ----------------------

    def next_step(self) -> None:
        """Another upstream step of the same response: output indexes and sequence numbers continue."""
        self.finish_reason = None

    def _usage(self, ev: g.Usage) -> None:
        """Usage of every upstream step, added up."""
        u = self.usage
        if u is None:
            # cache_write_tokens: the openai SDK (3.x) requires it beside cached_tokens
            u = self.usage = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                              "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 0}
        u["input_tokens"] += ev.input_tokens
        u["input_tokens_details"]["cached_tokens"] += ev.cached_tokens
        u["input_tokens_details"]["cache_write_tokens"] += ev.cache_write_tokens
        u["output_tokens"] += ev.output_tokens
        u["output_tokens_details"]["reasoning_tokens"] += ev.reasoning_tokens
        u["total_tokens"] += ev.input_tokens + ev.output_tokens

    # -- items -----------------------------------------------------------------------------------------

    def _next(self) -> int:
        seq = self.seq
        self.seq = seq + 1
        return seq

    next_seq = _next  # what the tool half numbers its events with (tools/calls.py)

    def output_items(self) -> list[dict[str, Any]]:
        return self.output

    def _lifecycle(self, kind: str) -> dict[str, Any]:
        snapshot = dict(self.response)
        snapshot["output"] = []
        return {"type": kind, "sequence_number": self._next(), "response": snapshot}

    def open_item(self, out: list[dict[str, Any]], kind: str, item: dict[str, Any],
                  runner: Runner | None = None) -> OpenItem:
        index = len(self.output)
        self.output.append(item)
        added = dict(item)
        for key in ("content", "summary"):  # the live lists fill up before this event is encoded
            if key in added:
                added[key] = []
        out.append({"type": "response.output_item.added", "sequence_number": self._next(),
                    "output_index": index, "item": added})
        return OpenItem(kind, item, index, runner)

    def _text(self, out: list[dict[str, Any]], part: str, text: str, logprobs: list[Any] | None) -> None:
        item = self.text_item
        if item is None or item.kind != "message":
            self.close_text(out, "completed")
            item = self.text_item = self.open_item(out, "message", {
                "id": new_id("msg"), "type": "message", "status": "in_progress", "content": [],
                "role": "assistant",
            })
        if item.part != part:
            self._close_part(out, item)
            self._open_part(out, item, part)
        if part == "output_text" and self.annotators:
            self._annotated(out, item, text, logprobs, None)
            return
        item.buf.append(text)
        seq = self._next()
        if part == "output_text":
            lp = logprobs if (logprobs and self.want_logprobs) else []
            if lp and item.logprobs is not None:
                item.logprobs.extend(lp)
            out.append({"type": "response.output_text.delta", "sequence_number": seq, "item_id": item.id,
                        "output_index": item.index, "content_index": len(item.item["content"]),
                        "delta": text, "logprobs": lp})
        else:
            out.append({"type": "response.refusal.delta", "sequence_number": seq, "item_id": item.id,
                        "output_index": item.index, "content_index": len(item.item["content"]),
                        "delta": text})

    def _annotated(self, out: list[dict[str, Any]], item: OpenItem, text: str, logprobs: list[Any] | None,
                   flushing: bool | None) -> None:
        """Output text through the response's annotators (citations): what they let through goes out as a
        delta, then each annotation that became complete. `flushing`: the part is closing (all is let out)."""
        notes: list[dict[str, Any]] = []
        for annotator in self.annotators:
            if flushing:
                held, more = annotator.flush(item.sent)
                text += held
            else:
                text, more = annotator.feed(text, item.sent)
            notes += more
        if text:
            item.buf.append(text)
            item.sent += len(text)
            lp = logprobs if (logprobs and self.want_logprobs) else []
            if lp and item.logprobs is not None:
                item.logprobs.extend(lp)
            out.append({"type": "response.output_text.delta", "sequence_number": self._next(), "item_id": item.id,
                        "output_index": item.index, "content_index": len(item.item["content"]),
                        "delta": text, "logprobs": lp})
        for note in notes:
            out.append({"type": "response.output_text.annotation.added", "sequence_number": self._next(),
                        "item_id": item.id, "output_index": item.index, "content_index": len(item.item["content"]),
                        "annotation_index": len(item.annotations), "annotation": note})
            item.annotations.append(note)

    def _reasoning(self, out: list[dict[str, Any]], ev: g.ReasoningDelta) -> None:
        item = self.text_item
        if item is None or item.kind != "reasoning":
            self.close_text(out, "completed")
            item = self.text_item = self.open_item(out, "reasoning", {
                "id": new_id("rs"), "type": "reasoning", "summary": [], "content": [],
            })
            self._open_part(out, item, self.reasoning_part)
        if ev.signature:
            item.signature = (item.signature or "") + ev.signature
        if ev.text:
            item.buf.append(ev.text)
            if item.part == "summary_text":
                out.append({"type": "response.reasoning_summary_text.delta", "sequence_number": self._next(),
                            "item_id": item.id, "output_index": item.index, "summary_index": 0,
                            "delta": ev.text})
            else:
                out.append({"type": "response.reasoning_text.delta", "sequence_number": self._next(),
                            "item_id": item.id, "output_index": item.index, "content_index": 0,
                            "delta": ev.text})

    def _start_call(self, out: list[dict[str, Any]], ev: g.ToolCallStart) -> None:
        self.close_text(out, "completed")
        runner = self.runners.get(ev.runner) if ev.runner is not None else None
        item: dict[str, Any]
        kind: str = ev.kind
        if runner is not None:
            item, kind = runner.item(ev), "gateway"
            if isinstance(runner, WholeCalls):  # shown only once whole (tools/calls.py)
                old = self.calls.pop(ev.key, None)
                if old is not None:
                    self._close_call(out, old, "completed")
                self.calls[ev.key] = self.start_whole_call(runner, item)
                return
        elif ev.kind == "custom":
            item = {"id": new_id("ctc"), "type": "custom_tool_call", "status": "in_progress",
                    "call_id": ev.call_id, "name": ev.name, "input": ""}
        elif ev.kind == "tool_search":
            item = {"id": new_id("tsc"), "type": "tool_search_call", "status": "in_progress",
                    "call_id": ev.call_id, "execution": "client", "arguments": {}}
        else:  # a function, or a call of a tool nobody declared: the client sees it as a function call
            item = {"id": new_id("fc"), "type": "function_call", "status": "in_progress", "arguments": "",
                    "call_id": ev.call_id, "name": ev.name}
            kind = "function"
        if ev.namespace and runner is None:
            item["namespace"] = ev.namespace
        old = self.calls.pop(ev.key, None)
        if old is not None:  # an upstream reusing an index for a new call: the old one is finished
            self._close_call(out, old, "completed")
        call = self.open_item(out, kind, item, runner)
        self.calls[ev.key] = call
        if runner is not None:
            self.send_specs(out, call, runner.added(call))

    # -- parts and closing -------------------------------------------------------------------------------

    def _open_part(self, out: list[dict[str, Any]], item: OpenItem, part: str) -> None:
        item.part = part
        item.buf = []
        if part == "output_text":
            item.logprobs = []
            item.annotations = []
            item.sent = 0
            shape = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        elif part == "refusal":
            shape = {"type": "refusal", "refusal": ""}
        elif part == "summary_text":
            out.append({"type": "response.reasoning_summary_part.added", "sequence_number": self._next(),
                        "item_id": item.id, "output_index": item.index, "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""}})
            return
        else:
            shape = {"type": "reasoning_text", "text": ""}
        out.append({"type": "response.content_part.added", "sequence_number": self._next(), "item_id": item.id,
                    "output_index": item.index, "content_index": len(item.item["content"]), "part": shape})

    def _close_part(self, out: list[dict[str, Any]], item: OpenItem) -> None:
        part = item.part
        if part is None:
            return
        if part == "output_text" and self.annotators:
            self._annotated(out, item, "", None, True)
        text = "".join(item.buf)
        final: dict[str, Any]
        if part == "summary_text":
            base = {"item_id": item.id, "output_index": item.index, "summary_index": 0}
            final = {"type": "summary_text", "text": text}
            out.append({"type": "response.reasoning_summary_text.done", "sequence_number": self._next(), **base,
                        "text": text})
            out.append({"type": "response.reasoning_summary_part.done", "sequence_number": self._next(), **base,
                        "part": final})
            item.item["summary"].append(final)
            item.part = None
            item.buf = []
            return
        content = item.item["content"]
        index = len(content)
        base = {"item_id": item.id, "output_index": item.index, "content_index": index}
        if part == "output_text":
            lp = item.logprobs or []
            final = {"type": "output_text", "annotations": item.annotations, "logprobs": lp, "text": text}
            out.append({"type": "response.output_text.done", "sequence_number": self._next(), **base,
                        "text": text, "logprobs": lp})
        elif part == "refusal":
            final = {"type": "refusal", "refusal": text}
            out.append({"type": "response.refusal.done", "sequence_number": self._next(), **base,
                        "refusal": text})
        else:
            final = {"type": "reasoning_text", "text": text}
            out.append({"type": "response.reasoning_text.done", "sequence_number": self._next(), **base,
                        "text": text})
        out.append({"type": "response.content_part.done", "sequence_number": self._next(), **base,
                    "part": final})
        content.append(final)
        item.part = None
        item.buf = []

    def close_text(self, out: list[dict[str, Any]], status: str) -> None:
        item = self.text_item
        if item is None:
            return
        self.text_item = None
        if item.kind == "reasoning":
            text = "".join(item.buf)
            self._close_part(out, item)
            if self.encrypted_reasoning:
                item.item["encrypted_content"] = seal(text, item.signature)
            elif item.signature:
                # An upstream signature (e.g. Anthropic's) is needed to send the reasoning back in a later
                # turn: stored, but shown only to clients that ask for encrypted content, as OpenAI does.
                self.sealed[item.id] = seal(text, item.signature)
        else:
            self._close_part(out, item)
            item.item["status"] = status
        out.append({"type": "response.output_item.done", "sequence_number": self._next(),
                    "output_index": item.index, "item": item.item})

    def _close_call(self, out: list[dict[str, Any]], call: OpenItem, status: str) -> None:
        text = "".join(call.buf)
        item = call.item
        runner = call.runner
        if runner is not None:
            self.close_tool_call(out, call, runner, status)
            return
        if call.kind == "custom":
            item["input"] = text
            out.append({"type": "response.custom_tool_call_input.done", "sequence_number": self._next(),
                        "item_id": call.id, "output_index": call.index, "input": text})
        elif call.kind == "tool_search":
            item["arguments"] = _json_object(text)  # no arguments events: the object comes whole
        else:
            item["arguments"] = text
            out.append({"type": "response.function_call_arguments.done", "sequence_number": self._next(),
                        "item_id": call.id, "output_index": call.index, "name": item["name"],
                        "arguments": text})
        item["status"] = status
        out.append({"type": "response.output_item.done", "sequence_number": self._next(),
                    "output_index": call.index, "item": item})

    def _close_all(self, out: list[dict[str, Any]], status: str) -> None:
        self.close_text(out, status)
        calls = sorted(self.calls.values(), key=lambda c: c.index)
        self.calls = {}
        for call in calls:
            self._close_call(out, call, status)
        if status != "completed":  # calls that will not run now: closed as failed, never left open
            for call in self.take_pending():
                out.extend(self.fail_call(call, "The response ended before the call could run."))

    def _terminal(self, out: list[dict[str, Any]], status: str, **fields: Any) -> None:
        self.closed = True
        response = self.response
        response["status"] = status
        shown = self.shown
        response["output"] = self.output if shown is None else [shown(item) for item in self.output]
        response["usage"] = self.usage
        response.update(fields)
        out.append({"type": f"response.{status}", "sequence_number": self._next(), "response": response})


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {"query": text}
    return value if isinstance(value, dict) else {"query": value}


_ARGS_DELTA = {
    "function": "response.function_call_arguments.delta",
    "custom": "response.custom_tool_call_input.delta",
}
