"""The code blocks of a markdown document, each with the section it stands in, for the tests that run a doc's
snippets as a reader would copy them (docs/clients.md, the README's first run).

    for block in snippets.blocks(ROOT / "docs" / "clients.md"):
        block.section, block.lang, block.code, block.line
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^(#{1,6}) +(.+?) *$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    section: str  # the nearest heading above the block
    lang: str
    code: str
    line: int  # where the block starts, for failure messages

    def where(self, path: Path) -> str:
        return f"{path.name}:{self.line} ({self.section}, {self.lang})"


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    headings = [(m.start(), m.group(2)) for m in HEADING.finditer(text)
                if not any(f.start() < m.start() < f.end() for f in fences)]  # a `# comment` in a block is no heading
    out = []
    for match in fences:
        above = [title for at, title in headings if at < match.start()]
        out.append(Block(above[-1] if above else "", match.group(1), match.group(2),
                         text.count("\n", 0, match.start()) + 1))
    return out


def localize(code: str, replacements: dict[str, str]) -> str:
    """The snippet with the addresses a reader would use (the gateway on 127.0.0.1:8080, ...) replaced by the
    test's own."""
    for old, new in replacements.items():
        code = code.replace(old, new)
    return code
