"""Server-Sent Events: the encoder for our stream and a tolerant incremental decoder for upstream streams."""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"

# The events that end a stream: exactly one per response, always last (the composer writes them; pipeline.end
# is the one place that asks for them). Everything that must know where a stream ends asks here.
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TERMINAL_HEADS = tuple(f"event: {kind}\n".encode() for kind in sorted(TERMINAL))


def ends(events: list[dict[str, Any]]) -> bool:
    """Whether a batch of events ends with the terminal event."""
    return bool(events) and events[-1]["type"] in TERMINAL


def is_terminal(frame: bytes) -> bool:
    """Whether one encoded SSE frame is a terminal event."""
    return frame.startswith(_TERMINAL_HEADS)


def ends_terminal(frames: bytes) -> bool:
    """Whether the last of several encoded SSE frames is a terminal event (frames end with a blank line; the
    JSON in them never holds a raw newline)."""
    start = frames.rfind(b"\n\n", 0, len(frames) - 2)
    return is_terminal(frames[start + 2:] if start >= 0 else frames)


# `event: <type>\ndata: ` per event type, made once: the types are the composer's own closed set.
_HEADS: dict[str, bytes] = {}


def _head(name: str) -> bytes:
    head = _HEADS.get(name)
    if head is None:
        head = b"event: " + name.encode() + b"\ndata: "
        if len(_HEADS) < 512:
            _HEADS[name] = head
    return head


def encode(event: dict[str, Any]) -> bytes:
    return _head(event["type"]) + orjson.dumps(event) + b"\n\n"


def encode_all(events: list[dict[str, Any]], dumps: Any = orjson.dumps) -> bytes:
    """One buffer for all events that are ready together, so the server makes one write for them (one join:
    a third less than encoding each event and joining those)."""
    parts: list[bytes] = []
    heads = _HEADS
    for event in events:
        parts += (heads.get(event["type"]) or _head(event["type"]), dumps(event), b"\n\n")
    return b"".join(parts)


class SSEDecoder:
    """Feeds on arbitrary byte chunks; yields (event, data) for each complete frame.

    `data` stays bytes: it goes straight to orjson, with no str made per upstream chunk.

    Tolerates CRLF or LF line ends, comments, frames split anywhere, several `data:` lines in one frame
    and missing spaces after the colon.
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        if not self._buf and chunk.startswith(b"data: ") and chunk.find(b"\n") == len(chunk) - 2 \
                and chunk.endswith(b"\n\n") and b"\r" not in chunk:
            # One whole `data:` frame in one read, nothing pending: what a paced upstream sends per token.
            return [(None, chunk[6:-2])]
        buf = self._buf + chunk if self._buf else chunk
        held = b""
        if b"\r" in buf:
            if buf.endswith(b"\r"):  # maybe the first half of a CRLF cut between two reads: wait for the next
                held, buf = b"\r", buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = buf.split(b"\n\n")  # one C call, not a find per frame
        self._buf = blocks.pop() + held
        frames: list[tuple[str | None, bytes]] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:  # the common case: one data line
                frames.append((None, block[6:]))
            else:
                frame = _parse(block)
                if frame is not None:
                    frames.append(frame)
        return frames

    def flush(self) -> list[tuple[str | None, bytes]]:
        """A final frame that the upstream did not terminate with a blank line."""
        rest, self._buf = self._buf.replace(b"\r", b"\n"), b""
        frame = _parse(rest.strip(b"\n")) if rest.strip() else None
        return [frame] if frame is not None else []


def _parse(block: bytes) -> tuple[str | None, bytes] | None:
    if block.startswith(b"data: ") and b"\n" not in block:  # the common case: one data line
        return None, block[6:]
    event = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode()
    if not data and event is None:
        return None
    return event, b"\n".join(data)
