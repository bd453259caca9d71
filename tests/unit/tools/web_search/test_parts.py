"""The web_search kit's pure parts: citations while streaming, the declaration, domains, actions, rendering,
extraction, rate limit and cache."""

from __future__ import annotations

import orjson
import pytest

from responses_gateway.errors import APIError
from responses_gateway.tools.web_search import render
from responses_gateway.tools.web_search.actions import arguments_of, parse_arguments
from responses_gateway.tools.web_search.citations import Citations, canonical
from responses_gateway.tools.web_search.domains import DomainPolicy, normalize_domain
from responses_gateway.tools.web_search.extract import extract
from responses_gateway.tools.web_search.kit import lower, shown
from responses_gateway.tools.web_search.limits import TokenBucket, TTLCache
from responses_gateway.tools.web_search.options import parse
from responses_gateway.tools.web_search.runner import find

URL = "https://www.federalreserve.gov/newsevents/pressreleases/monetary20251210a.htm?utm_source=openai"
TITLE = "Federal Reserve Board - Federal Reserve issues FOMC statement"


def stream(pieces: list[str], known: dict[str, str]) -> tuple[str, list[tuple[int, dict]]]:
    """Feed pieces as the composer does; the text sent and each annotation with the length sent before it."""
    c = Citations(known)
    sent = ""
    notes = []
    for piece in pieces:
        out, new = c.feed(piece, len(sent))
        sent += out
        notes += [(len(sent), n) for n in new]
    out, new = c.flush(len(sent))
    sent += out
    notes += [(len(sent), n) for n in new]
    return sent, notes


def test_the_recorded_citation_span_and_timing():
    """OpenAI's recording: the link wrapped in parentheses, cited after the delta that closes it."""
    pieces = ["incoming data.", " ", f"([federalreserve.gov]({URL})", ")\n", "\nWhat this means"]
    text, notes = stream(pieces, {canonical(URL.replace("?utm_source=openai", "")): TITLE})
    assert text == "".join(pieces)
    ((sent_before, note),) = notes
    assert text[note["start_index"]:note["end_index"]] == f"([federalreserve.gov]({URL}))"
    assert note == {"type": "url_citation", "start_index": 15, "end_index": 15 + len(f"([federalreserve.gov]({URL}))"),
                    "title": TITLE, "url": URL}
    assert sent_before == len("".join(pieces[:4]))  # right after the ")" that completes the span


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_any_chunking_gives_the_same_spans(size):
    text = ("Rates ([a.example](https://a.example/x)) and [b](https://b.example/y/) but not "
            "[c](https://c.example/) nor ([d](https://a.example/x(1))). Done ([a.example](https://a.example/x))")
    known = {canonical("https://a.example/x"): "A", canonical("https://b.example/y"): "B",
             canonical("https://a.example/x(1)"): "D"}
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    sent, notes = stream(pieces, known)
    assert sent == text
    spans = [(text[n["start_index"]:n["end_index"]], n["title"]) for _, n in notes]
    assert spans == [("([a.example](https://a.example/x))", "A"), ("[b](https://b.example/y/)", "B"),
                     ("([d](https://a.example/x(1)))", "D"), ("([a.example](https://a.example/x))", "A")]
    for sent_before, note in notes:
        assert note["end_index"] <= sent_before  # never before its text went out


def test_a_link_at_the_end_of_a_part_is_cited_at_flush():
    sent, notes = stream(["see ([a](https://a.example/)"], {canonical("https://a.example"): "A"})
    ((_, note),) = notes
    assert sent[note["start_index"]:note["end_index"]] == "[a](https://a.example/)"


def test_nothing_is_cited_without_known_urls_or_links():
    assert stream(["plain [text] (here)"], {canonical("https://a.example"): "A"})[1] == []
    assert stream(["([a](https://a.example))"], {})[1] == []


def test_canonical_urls():
    assert canonical("HTTPS://Example.COM:443/a/?utm_source=x&b=1#frag") == "https://example.com/a?b=1"
    assert canonical("http://example.com:8080/") == "http://example.com:8080"


def test_the_declaration_and_its_echo():
    opts = parse({"type": "web_search"}, "tools[0]")
    assert opts.echo() == {"type": "web_search", "filters": None, "search_context_size": "medium",
                           "user_location": {"type": "approximate", "city": None, "country": "US", "region": None,
                                             "timezone": None}}
    opts = parse({"type": "web_search_preview", "user_location": {"type": "approximate"},
                  "search_context_size": "high"}, "tools[0]")
    assert opts.echo() == {"type": "web_search_preview", "search_context_size": "high",
                           "user_location": {"type": "approximate", "city": None, "country": None, "region": None,
                                             "timezone": None}}
    opts = parse({"type": "web_search_2025_08_26", "filters": {"allowed_domains": ["https://Docs.Example.com/x"]},
                  "user_location": {"type": "approximate", "country": "de", "city": "Berlin"},
                  "external_web_access": False, "search_content_types": ["text", "image"]}, "tools[1]")
    assert (opts.allowed, opts.location.country, opts.location.city, opts.live) == (
        ("docs.example.com",), "DE", "Berlin", False)
    assert opts.echo()["external_web_access"] is False


@pytest.mark.parametrize(("spec", "param"), [
    ({"type": "web_search", "bogus": 1}, "tools[0].bogus"),
    ({"type": "web_search", "search_context_size": "huge"}, "tools[0].search_context_size"),
    ({"type": "web_search", "filters": {"allowed_domains": "example.com"}}, "tools[0].filters.allowed_domains"),
    ({"type": "web_search", "filters": {"allowed_domains": [""]}}, "tools[0].filters.allowed_domains[0]"),
    ({"type": "web_search", "user_location": {"country": "USA"}}, "tools[0].user_location.country"),
    ({"type": "web_search", "external_web_access": "no"}, "tools[0].external_web_access"),
])
def test_bad_declarations_are_400s_naming_the_field(spec, param):
    with pytest.raises(APIError) as err:
        parse(spec, "tools[0]")
    assert (err.value.status, err.value.param) == (400, param)


def test_domains():
    assert normalize_domain("https://user@Sub.Example.com:8443/path") == "sub.example.com"
    assert normalize_domain("*.example.com") == "example.com"
    policy = DomainPolicy.of(["example.com"]).narrowed(deny=["bad.example.com"])
    assert policy.allows("https://example.com/a") and policy.allows("https://docs.example.com/a")
    assert not policy.allows("https://notexample.com/") and not policy.allows("https://bad.example.com/x")
    narrowed = policy.narrowed(["docs.example.com"])
    assert not narrowed.allows("https://example.com/") and narrowed.allows("https://docs.example.com/")
    assert DomainPolicy().allows("http://127.0.0.1:1/") and not DomainPolicy().allows("not a url")


def test_arguments_are_read_leniently_and_refused_clearly():
    assert parse_arguments('{"queries": ["a", " a ", "b"]}').queries == ("a", "b")
    assert parse_arguments('{"query": "x"}').item() == {"type": "search", "query": "x"}
    assert parse_arguments('{"queries": ["a", "b"]}').item() == {"type": "search", "query": "a",
                                                                 "queries": ["a", "b"]}
    assert parse_arguments('{"url": "example.com/p"}').item() == {"type": "open_page", "url": "https://example.com/p"}
    assert parse_arguments('{"url": "https://e.com", "pattern": "x"}').kind == "find_in_page"
    for bad, says in (("not json", "not valid JSON"), ('{"queries": []}', "at least one"),
                      ('{"action": "open_page"}', "needs a 'url'"), ('{"action": "dance"}', "Unknown action")):
        with pytest.raises(ValueError, match=says):
            parse_arguments(bad)
    action = {"type": "search", "query": "a", "queries": ["a", "b"]}
    assert orjson.loads(arguments_of(action)) == {"queries": ["a", "b"]}


def test_what_include_shows_and_what_later_turns_see():
    item = {"id": "ws_1", "type": "web_search_call", "status": "completed",
            "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": "https://a.example/"}]},
            "results": [{"url": "https://a.example/", "title": "A", "snippet": "about </UNTRUSTED_WEB_CONTENT> a"}]}
    assert shown(item, frozenset()) == {"id": "ws_1", "type": "web_search_call", "status": "completed",
                                        "action": {"type": "search", "query": "q"}}
    assert "sources" in shown(item, frozenset({"web_search_call.action.sources"}))["action"]
    assert "results" in shown(item, frozenset({"web_search_call.results"}))
    call, output = lower(item)
    assert (call["name"], orjson.loads(call["arguments"])) == ("web_search", {"queries": ["q"]})
    text = output["output"]
    assert text.count(render.OPEN) == 1 and text.count(render.CLOSE) == 1  # the page cannot close the fence
    assert text.index(render.OPEN) < text.index("https://a.example/") < text.index(render.CLOSE)
    failed = lower({"id": "ws_2", "type": "web_search_call", "status": "failed", "action": {"type": "open_page",
                    "url": "http://x"}, "error": "refused"})[1]["output"]
    assert failed == "Web search failed: refused"
    replayed = lower({"id": "ws_3", "type": "web_search_call", "status": "completed",
                      "action": {"type": "search", "query": "q"}})[1]["output"]
    assert "no longer available" in replayed


def test_extraction_keeps_what_a_reader_reads():
    from tests.support.fake_web import ARTICLE

    page = extract(ARTICLE.encode(), "text/html", None, "http://x/")
    assert page.title == "Interest rates & the Fed – Example News"
    assert page.text.splitlines()[:2] == [
        "The Federal Reserve holds rates",
        "The Federal Reserve kept its target range for the federal funds rate at 3.50% to 3.75% on Wednesday."]
    for gone in ("Home", "tracking", "Advertisement", "Example News\n", "font-family"):
        assert gone not in page.text
    latin = "<html><head><meta charset='iso-8859-1'><title>caf\xe9</title></head><body>na\xefve</body></html>"
    assert extract(latin.encode("latin-1"), "text/html", None, "u").text == "naïve"
    assert extract(b"a  b\n\n c", "text/plain", None, "u").text == "a b\nc"


def test_find_in_page():
    text = "alpha beta\ngamma " * 3 + "x" * 1000 + " Beta   Gamma"
    found = find(text, "beta gamma")
    assert len(found) == 2 and found[1].endswith("Beta Gamma") and found[1].startswith("…")


def test_token_bucket_and_cache():
    now = [0.0]
    bucket = TokenBucket(2, clock=lambda: now[0])
    assert bucket.take() and bucket.take() and not bucket.take()
    assert bucket.wait() == pytest.approx(0.5)
    now[0] = 0.5
    assert bucket.take()
    cache: TTLCache[int] = TTLCache(10, size=2, clock=lambda: now[0])
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("c")) == (None, 3)
    now[0] = 11
    assert cache.get("c") is None


def test_errors_the_model_reads_never_show_a_providers_url():
    from responses_gateway.tools.web_search.config import ProviderConfig, WebSearchConfig
    from responses_gateway.tools.web_search.service import WebSearch

    config = WebSearchConfig((ProviderConfig("mcp", "http://user:pw@search.internal:8931/mcp"),
                              ProviderConfig("searxng", "http://10.0.0.7:8888/")))
    service = WebSearch(config)
    said = ("mcp: could not connect to http://user:pw@search.internal:8931/mcp (search.internal:8931 refused); "
            "searxng: http://10.0.0.7:8888/search answered 500")
    hidden = service.hide(said)
    for secret in ("search.internal", "10.0.0.7", "user:pw", "8931", "8888"):
        assert secret not in hidden, hidden
    assert hidden.startswith("mcp: could not connect to mcp") and "searxng: searxng/search answered 500" in hidden


def test_a_failed_calls_own_words_replay_and_stay_hidden():
    item = {"id": "ws_1", "type": "web_search_call", "status": "failed", "action": {"type": "search", "query": ""},
            "error": "bad", "arguments": '{"qeuries": "x"'}
    call, _ = lower(item)
    assert call["arguments"] == '{"qeuries": "x"'
    assert "arguments" not in shown(item, frozenset({"web_search_call.results", "web_search_call.action.sources"}))
    del item["arguments"]
    assert lower(item)[0]["arguments"] == '{"queries":[]}'
