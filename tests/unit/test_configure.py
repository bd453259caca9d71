"""configure.py and settings.py: every setting declared once, and its flag, variable, `--help` group, checks,
`--config` table and README row derived from that one declaration."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from responses_gateway import configure
from responses_gateway import settings as declare
from responses_gateway.config import Settings
from responses_gateway.tools.code_interpreter.settings import CodeInterpreterSettings
from responses_gateway.tools.web_search.settings import WebSearchSettings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_tables_are_the_declarations():
    """Regenerate with: python -m responses_gateway.configure --readme"""
    text = README.read_text(encoding="utf-8")
    start = text.index(configure.README_BEGIN) + len(configure.README_BEGIN)
    assert text[start:text.index(configure.README_END)].strip() == configure.readme_tables().strip(), \
        "README's configuration tables differ from the declarations: python -m responses_gateway.configure --readme"


def test_every_setting_has_one_flag_one_variable_and_help():
    every = configure.declared()
    flags = [one.flag for one in every]
    envs = [one.env for one in every]
    assert len(set(flags)) == len(flags) and len(set(envs)) == len(envs)
    assert len({one.name for one in every}) == len(every)  # names unique across groups
    assert all(one.meta.help for one in every)
    assert all(env.startswith("RG_") for env in envs)


def parse(*argv: str, command: str = "serve") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure.add_arguments(parser, command)
    return parser.parse_args(list(argv))


def test_flags_then_variables_then_defaults_and_tool_groups_typed():
    args = parse("--port", "9000", "--web-search", "searxng=http://127.0.0.1:8888", "--code-interpreter-timeout", "7")
    settings = configure.settings_from(args, {"RG_PORT": "1", "RG_WEB_SEARCH_RATE": "2.5", "RG_ACCESS_LOG": "yes"})
    assert (settings.port, settings.access_log) == (9000, True)
    search = settings.group(WebSearchSettings)
    assert (search.web_search, search.web_search_rate) == ("searxng=http://127.0.0.1:8888", 2.5)
    assert settings.group(CodeInterpreterSettings).code_interpreter_timeout == 7.0
    # what the workers of --workers N are given gives the same settings back
    again = configure.settings_from_env(configure.to_env(settings))
    assert again == settings and again.groups == settings.groups


def test_the_db_command_takes_only_its_settings():
    assert parse("--db", "none", "--retention-days", "3", command="db").retention_days == 3.0
    with pytest.raises(SystemExit):
        parse("--port", "1", command="db")


@pytest.mark.parametrize("values, says", [
    ({"port": 8080, "max_in_flight": 0}, "--max-in-flight must be positive"),
    ({"websocket": "maybe"}, "--websocket must be one of on, off"),
    ({"web_search": "bing=http://x"}, "unknown provider kind"),
    ({"code_interpreter_timeout": -1.0}, "--code-interpreter-timeout must be positive"),
    ({"embeddings_url": "ftp://x"}, r"--embeddings-url must be an http\(s\) URL"),
])
def test_a_wrong_value_names_its_flag(values, says):
    with pytest.raises(ValueError, match=says):
        configure.build(values)


def test_make_refuses_a_name_that_is_no_setting():
    with pytest.raises(TypeError, match="unknown settings: no_such"):
        configure.make(no_such=1)


def test_a_tools_config_table_sets_its_group_below_flags(tmp_path):
    toml = tmp_path / "gateway.toml"
    toml.write_text('[code_interpreter]\ntimeout = 9\ncode_interpreter_processes = 8\n')
    settings = configure.build({"config": str(toml), "code_interpreter_processes": 4})
    group = settings.group(CodeInterpreterSettings)
    assert (group.code_interpreter_timeout, group.code_interpreter_processes) == (9.0, 4)  # the flag wins
    toml.write_text('[code_interpreter]\nspeed = 3\n')
    with pytest.raises(ValueError, match=r"\[code_interpreter\]: unknown key 'speed'"):
        configure.build({"config": str(toml)})
    toml.write_text('[code_interpreter]\ntimeout = "slow"\n')
    with pytest.raises(ValueError, match="timeout must be a float"):
        configure.build({"config": str(toml)})


def test_a_group_not_given_is_its_defaults():
    assert Settings().group(WebSearchSettings) == WebSearchSettings()


def test_secrets_have_no_default_value_and_the_help_is_grouped():
    assert all(one.default is None for one in configure.declared() if one.meta.secret)  # no value to leak
    parser = argparse.ArgumentParser()
    configure.add_arguments(parser, "serve")
    titles = [group.title for group in parser._action_groups]
    assert {"Upstream", "Limits", "Web search (docs/web-search.md)",
            "Code interpreter (docs/code-interpreter.md)"} <= set(titles)
    assert declare.title(WebSearchSettings) == "Web search (docs/web-search.md)"
