"""Settings declared once: each is a field of a frozen dataclass, declared with `setting(...)`, and everything
else is derived from that one declaration — the command-line flag, the environment variable, the `--help`
group, the value checks, a `--config` table's keys, and the README's configuration table.

The core settings are `config.Settings`; each gateway-run tool declares its own group in its package
(`tools/<tool>/settings.py`) and its kit names it (`Kit.settings`). Names are unique across all groups, so
the flag `--web-search-timeout` and the variable `RG_WEB_SEARCH_TIMEOUT` follow from the field
`web_search_timeout` unless the declaration says otherwise.

This module is pure: it knows dataclasses and strings, nothing of the gateway.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tomllib
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Check = Literal["positive", "non_negative"]

MISSING: Any = dataclasses.MISSING


@dataclass(frozen=True)
class Meta:
    """How one setting appears outside the code. Empty strings are derived from the field's name."""

    help: str
    flag: str = ""
    env: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    check: Check | None = None
    secret: bool = False  # a key or password: never logged, never shown as a default
    shown: str = ""  # the default as --help and the README show it, when not the value itself
    doc: str = ""  # the README's longer meaning (default: `help`)
    commands: tuple[str, ...] = ("serve",)  # the subcommands that take it
    group: str = ""  # its --help group and README table (default: the declaring class's title)


def setting(default: Any, *, help: str, flag: str = "", env: str = "", metavar: str | None = None,
            choices: Sequence[str] = (), check: Check | None = None, secret: bool = False, shown: str = "",
            doc: str = "", commands: Sequence[str] = ("serve",), group: str = "") -> Any:
    """A dataclass field that is a setting (see the module's docstring)."""
    meta = Meta(help, flag, env, metavar, tuple(choices), check, secret, shown, doc, tuple(commands), group)
    return dataclasses.field(default=default, metadata={"setting": meta})


@dataclass(frozen=True)
class Declared:
    """One setting, resolved: its field, its type, its flag and variable, its group's title."""

    name: str
    kind: str  # "str", "int", "float", "bool"
    optional: bool  # None is a value (an unset optional setting)
    default: Any
    meta: Meta
    group: str
    owner: type  # the dataclass that declares it

    @property
    def flag(self) -> str:
        return self.meta.flag or "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return self.meta.env or "RG_" + self.name.upper()

    @property
    def shown_default(self) -> str:
        if self.meta.shown:
            return self.meta.shown
        if self.default is None or self.meta.secret:
            return ""
        if self.kind == "bool":
            return "on" if self.default else "off"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def parse(self, raw: str) -> Any:
        """A value given as text (a variable, a flag): converted to the field's type."""
        if self.kind == "bool":
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if self.kind == "int":
            return int(raw)
        if self.kind == "float":
            return float(raw)
        return raw


def title(group: type) -> str:
    """A group's title: the first line of its docstring."""
    return (group.__doc__ or group.__name__).strip().splitlines()[0].rstrip(".")


def declared(group: type) -> tuple[Declared, ...]:
    """The settings a dataclass declares, in order."""
    return _declared(group)


@functools.cache
def _declared(group: Any) -> tuple[Declared, ...]:
    hints = typing.get_type_hints(group)
    out = []
    for f in dataclasses.fields(group):
        meta = f.metadata.get("setting")
        if not isinstance(meta, Meta):
            continue
        kind, optional = _kind(hints[f.name])
        out.append(Declared(f.name, kind, optional, f.default, meta, meta.group or title(group), group))
    return tuple(out)


def _kind(hint: Any) -> tuple[str, bool]:
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if typing.get_origin(base) is Literal:
        return "str", optional
    name = getattr(base, "__name__", str(base))
    return (name if name in ("str", "int", "float", "bool") else "str"), optional


def from_env(groups: Iterable[type], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The variables that are set, by setting name, converted to their types."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for group in groups:
        for one in declared(group):
            raw = environ.get(one.env)
            if raw is not None and raw != "":
                out[one.name] = one.parse(raw)
    return out


def build(group: type, values: Mapping[str, Any]) -> Any:
    """An instance of `group` with the values of its own settings among `values` (the others ignored)."""
    mine = {one.name: values[one.name] for one in declared(group) if one.name in values}
    return group(**mine)


def check(instance: Any) -> None:
    """The declared checks of one group's values: choices, positive, non-negative. ValueError naming the flag."""
    for one in declared(type(instance)):
        value = getattr(instance, one.name)
        if value is None:
            continue
        if one.meta.choices and value not in one.meta.choices:
            raise ValueError(f"{one.flag} must be one of {', '.join(one.meta.choices)}; got {value!r}")
        if one.meta.check == "positive" and value <= 0:
            raise ValueError(f"{one.flag} must be positive; got {value!r}")
        if one.meta.check == "non_negative" and value < 0:
            raise ValueError(f"{one.flag} must be 0 or positive; got {value!r}")


def load_table(path: str, name: str) -> Any:
    """A top-level table of the `--config` file besides [[routes]] (e.g. [web_search]), or None."""
    with open(path, "rb") as fh:
        return tomllib.load(fh).get(name)


def from_table(group: type, table: Any, where: str, prefix: str) -> dict[str, Any]:
    """A `--config` table's values for a group: each key a setting's name, or its name without `prefix_`."""
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table")
    by_key: dict[str, Declared] = {}
    for one in declared(group):
        by_key[one.name] = one
        if one.name.startswith(prefix + "_"):
            by_key[one.name[len(prefix) + 1:]] = one
    out: dict[str, Any] = {}
    wanted: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float), "bool": bool}
    for key, value in table.items():
        found = by_key.get(key)
        if found is None:
            raise ValueError(f"{where}: unknown key {key!r} (one of {', '.join(sorted(by_key))})")
        if isinstance(value, bool) and found.kind != "bool" or not isinstance(value, wanted[found.kind]):
            raise ValueError(f"{where}: {key} must be a {found.kind}; got {value!r}")
        out[found.name] = float(value) if found.kind == "float" and isinstance(value, (int, float)) else value
    return out


# -- the README's configuration tables -----------------------------------------------------------------

def markdown(groups: Sequence[type]) -> str:
    """The README's configuration tables: one per group title (a class may declare several), a row per
    setting, in declaration order."""
    by_title: dict[str, list[Declared]] = {}
    for group in groups:
        for one in declared(group):
            by_title.setdefault(one.group, []).append(one)
    lines: list[str] = []
    for heading, settings in by_title.items():
        lines += [f"#### {heading}", "", "| flag | env | default | meaning |", "|---|---|---|---|"]
        for one in settings:
            flag = (one.flag if one.kind == "bool" else f"{one.flag} {metavar(one)}").replace("|", "\\|")
            meaning = (one.meta.doc or one.meta.help).replace("|", "\\|")
            default = one.shown_default.replace("|", "\\|")
            lines.append(f"| `{flag}` | `{one.env}` | {f'`{default}`' if default else '—'} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def metavar(one: Declared) -> str:
    """The placeholder for a setting's value in `--help` and the README."""
    if one.meta.metavar:
        return one.meta.metavar
    if one.meta.choices:
        return "|".join(one.meta.choices)
    if one.kind == "float":
        return "S" if one.name.endswith(("timeout", "_poll", "interval", "grace", "_ttl")) else "N"
    return "N" if one.kind == "int" else "VALUE"
