"""What a request declares of file_search, as the kit parses it (kit.py) and the runner uses it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .filters import Filter
from .ranking import Ranking


@dataclass(frozen=True)
class FileSearchConfig:
    vector_store_ids: tuple[str, ...]
    filters: Filter | None
    max_num_results: int
    ranking: Ranking
    ranking_options: dict[str, Any]  # as echoed
