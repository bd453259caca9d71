"""Load the recorded real-upstream exchanges kept in tests/data/recordings (provenance: tests/data/README.md).

Each YAML file holds one real HTTP exchange; a streamed response keeps its SSE text
exactly as it arrived (one list entry per network read), so tests can replay it byte for byte.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Inside the repository, so that a clone with nothing beside it runs the suite; RG_SHARED_DIR points elsewhere.
DATA_DIR = Path(os.environ.get("RG_SHARED_DIR", Path(__file__).resolve().parents[1] / "data"))
RECORDINGS_DIR = DATA_DIR / "recordings"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Recording:
    name: str
    request_body: dict[str, Any]
    status: int
    headers: dict[str, str]
    sse_chunks: list[str] | None = None
    body: dict[str, Any] | None = None

    @property
    def is_stream(self) -> bool:
        return self.sse_chunks is not None

    @property
    def sse_text(self) -> str:
        """The streamed body as the client received it (empty for JSON responses)."""
        return "".join(self.sse_chunks or ())


def load_recording(path: str | Path) -> Recording:
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        data = yaml.load(f, Loader=_Loader)
    response = data["response"]
    return Recording(
        name=path.stem,
        request_body=data.get("request", {}).get("body") or {},
        status=int(response.get("status_code", 200)),
        headers={str(k).lower(): str(v) for k, v in (response.get("headers") or {}).items()},
        sse_chunks=response.get("sse"),
        body=response.get("body"),
    )


def chat_recordings() -> list[Path]:
    return sorted((RECORDINGS_DIR / "chat_completions").glob("*.yaml"))


def responses_recordings() -> list[Path]:
    return sorted((RECORDINGS_DIR / "openai_responses").glob("*.yaml"))
