"""How the demo model uses tools: which declared tool a question calls for, the arguments it writes, and the
answer it gives from what the tool returned — as a real model would, from nothing but what it is shown.

It knows no tool in particular (an adapter knows nothing of gateway-run tools): it reads the tools' names,
descriptions and JSON schemas, and the outputs as text. So a newcomer sees, with no model server, the same
items and events a real model's call makes — a `function_call` for the client's tool; a `file_search_call`,
`web_search_call`, `code_interpreter_call` or `mcp_call` the gateway runs — and an answer that cites what a
search found (a `【n】` marker of file_search, a markdown link of web_search), which the gateway turns into
annotations.

The rules, all plain: a tool is called once per user message, never after its result came back in the same
turn; a forced tool is called; otherwise the tool whose name (or description) shares words with the question,
else — the request declaring them — the first tool the gateway runs, unless the question asks nothing (a
greeting); a client's tool that matches nothing is not called (a real model does not call `get_weather` to say
hello).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..protocol.tools import Tool, ToolSet

CALLS = ("function_call", "custom_tool_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
STOP_WORDS = (
    "a about after all also am an and any are as at be been but by can could did do does for from get give had has "
    "have hello hey hi how i if in into is it its me my no not of ok okay on or our out please say should so some "
    "tell than thank thanks that the their them then there these they this to up use using was we were what when "
    "where which who why will with would yes you your")
STOP = frozenset(STOP_WORDS.split(" "))
QUERY_NAMES = ("query", "queries", "question", "prompt", "search", "keyword", "topic")
URL = re.compile(r"https?://[^\s<>()\[\]\"'`]+")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ARITHMETIC = re.compile(r"[-(]*\d[\d.\s]*(?:(?:\*\*|[-+*/%^])[\s(]*\d[\d.\s)]*)+")
MARKER = re.compile(r"【(\d+)】([^\n]*)\n([^\n【]+)")
MOST = 160  # characters of a tool's output the demo quotes


@dataclass
class Result:
    """A tool's output in the history, with the call it answers."""

    name: str
    output: str


@dataclass
class Turn:
    """The history as the demo reads it: the user's messages, and the tool results since the last of them."""

    said: list[str] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)

    @property
    def question(self) -> str:
        return self.said[-1] if self.said else ""


def read_turn(items: list[dict[str, Any]]) -> Turn:
    turn = Turn()
    names: dict[str, str] = {}
    for item in items:
        kind = item.get("type")
        if kind == "message" and item.get("role") == "user":
            text = _text(item.get("content"))
            if text:
                turn.said.append(text)
                turn.results = []
        elif kind in CALLS:
            names[str(item.get("call_id"))] = str(item.get("name") or "the tool")
        elif kind in OUTPUTS:
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output) or orjson.dumps(output).decode()
            turn.results.append(Result(names.get(str(item.get("call_id")), "the tool"), text))
    return turn


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text")) for p in content if isinstance(p, dict) and p.get("text"))
    return ""


# --------------------------------------------------------------------------- choosing a tool


def choose(tools: ToolSet, turn: Turn) -> Tool | None:
    """The tool to call now, or None to answer in text."""
    usable = [t for t in tools.offered if t.kind in ("function", "custom") and not t.deferred]
    if turn.results or tools.mode == "none" or not usable:
        return None
    if tools.mode == "required" and tools.forced is not None:
        return tools.forced
    words = _words(turn.question)
    best, score = max(((tool, _score(tool, words)) for tool in reversed(usable)), key=lambda pair: pair[1])
    if score > 0:
        return best
    if tools.mode == "required":
        return usable[0]
    if not words:  # a greeting, a question about the model itself: nothing to look up
        return None
    return next((t for t in usable if t.runner is not None), None)


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 1}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _score(tool: Tool, words: set[str]) -> int:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", f"{tool.namespace or ''} {tool.name}")
    named = _words(spaced.replace("_", " ").replace("-", " ").replace(".", " "))
    described = {w for w in _words(tool.description or "") if len(w) > 3}
    return 3 * len(named & words) + len(described & words)


# --------------------------------------------------------------------------- writing the call


def call_input(tool: Tool, question: str) -> str:
    """What the demo writes for the call: JSON arguments from the function's schema, or a custom tool's input
    (Python code for a tool that runs Python, else the question itself)."""
    if tool.kind == "custom":
        runs_python = "python" in f"{tool.name} {tool.description or ''}".lower()
        return python_for(question) if runs_python else question
    arguments = Arguments(question).fill(tool.parameters or {"type": "object"}, tool.name)
    return orjson.dumps(arguments if isinstance(arguments, dict) else {}).decode()


def python_for(question: str) -> str:
    """Code that answers the question: the arithmetic in it, else a count of its words."""
    for match in ARITHMETIC.finditer(question):
        expression = match.group().strip().replace("^", "**")
        if expression.count("(") == expression.count(")"):
            return f"print({expression})\n"
    return f"text = {question!r}\nprint(len(text.split()), 'words,', len(text), 'characters')\n"


class Arguments:
    """Values for a JSON schema from the question: its numbers in order for numeric fields, a URL it names for
    URL fields, the whole question for a query, else the phrase it asks about ("... in Paris?" -> "Paris")."""

    def __init__(self, question: str):
        self.question = question.strip()
        self.numbers = iter(NUMBER.findall(question))

    def fill(self, schema: Any, name: str, depth: int = 0) -> Any:
        if not isinstance(schema, dict) or depth > 5:
            return self.subject()
        if schema.get("enum"):
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        for key in ("anyOf", "oneOf", "allOf"):
            options = [s for s in schema.get(key) or () if isinstance(s, dict) and s.get("type") != "null"]
            if options:
                return self.fill(options[0], name, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "object" or "properties" in schema:
            properties = schema.get("properties") or {}
            required = [k for k in schema.get("required") or () if k in properties]
            chosen = required or [k for k in properties if _is_query(k)][:1] or list(properties)[:1]
            return {key: self.fill(properties[key], key, depth + 1) for key in chosen}
        if kind == "array":
            return [self.fill(schema.get("items") or {"type": "string"}, name, depth + 1)]
        if kind in ("integer", "number"):
            found = next(self.numbers, None)
            value = float(found) if found is not None else float(schema.get("minimum", 1))
            return int(value) if kind == "integer" else value
        if kind == "boolean":
            return True
        if "url" in name.lower() or schema.get("format") == "uri":
            found_url = URL.search(self.question)
            return found_url.group().rstrip(".,;:?!") if found_url else "https://example.com/"
        return self.question.rstrip("?!. ") if _is_query(name) else self.subject()

    def subject(self) -> str:
        text = self.question.rstrip("?!. ")
        about = re.match(r".*\b(?:in|for|of|about|at|on)\s+([^,;:?!.]+)", text, re.IGNORECASE | re.DOTALL)
        if about is not None and 1 <= len(about.group(1).split()) <= 4:
            return about.group(1).strip()
        return text[:200]


def _is_query(name: str) -> bool:
    lowered = name.lower()
    return lowered in ("q", "text", "input") or any(word in lowered for word in QUERY_NAMES)


# --------------------------------------------------------------------------- reading the result


def answer(results: list[Result]) -> str:
    """The answer from the tools' outputs: a passage of a file search cited by its marker, the first page of a
    web search cited as a link, or what the tool returned."""
    return "[demo] " + " ".join(_reading(result) for result in results)


def _reading(result: Result) -> str:
    text = result.output.strip()
    passage = MARKER.search(text)
    if passage is not None:
        number, source, quoted = passage.groups()
        where = source.split(" (score")[0].strip()
        return f"{result.name} found in {where or 'the files'}: “{_cut(quoted.strip())}”【{number}】"
    link = URL.search(text)
    if link is not None:
        url = link.group().rstrip(".,;:?!")
        lines = [re.sub(r"^(\[\d+\]|Page:|URL:)\s*", "", line).strip() for line in text[:link.start()].splitlines()]
        title = next((line for line in reversed(lines) if line), url)
        host = urlsplit(url).hostname or url
        return f"{result.name} found “{_cut(title)}” ([{host}]({url}))."
    return f"{result.name} returned: {_cut(text) or '(nothing)'}"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MOST:
        return text
    return text[:MOST].rsplit(" ", 1)[0] + "…"
