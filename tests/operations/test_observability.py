"""/metrics of a real gateway process with two workers: latency histograms, tokens by model and route, and
the in-flight gauge summed over the workers (prometheus_client's multiprocess mode)."""

import re
import time

import httpx

from tests.operations.test_cli import serve, stop
from tests.support.fake_chat import Sleep, Stream, make_usage, text_stream


def sample(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{name}(\{{{re.escape(labels)}\}})? (\S+)$" if labels else rf"^{name} (\S+)$", text, re.M)
    assert found, f"{name}{{{labels}}} missing from:\n{text}"
    return float(found.groups()[-1])


def scrape(url: str) -> str:
    return httpx.get(f"{url}/metrics", headers={"connection": "close"}).text


def test_metrics_of_three_responses_and_one_in_flight(upstream, tmp_path):
    usage = make_usage(prompt_tokens=11, completion_tokens=7)
    upstream.default = Stream(text_stream(["Hel", "lo"], usage=usage))
    proc, url = serve("--workers", "2", "--db", str(tmp_path / "r.db"), "--log-level", "warning",
                      env={"RG_UPSTREAM_URL": upstream.base_url})
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            for stream in (True, False, True):
                r = http.post("/v1/responses", json={"model": "fake-model", "input": "hi", "stream": stream},
                              headers={"connection": "close"})
                assert r.status_code == 200, r.text
            text = scrape(url)
            route = 'route="*"'
            assert sample(text, "responses_gateway_time_to_first_token_seconds_count", route) == 3
            assert sample(text, "responses_gateway_upstream_latency_seconds_count", route) == 3
            assert sample(text, "responses_gateway_response_duration_seconds_count",
                          'route="*",status="completed"') == 3
            assert sample(text, "responses_gateway_store_latency_seconds_count") == 3
            assert sample(text, "responses_gateway_tokens_total",
                          'direction="input",model="fake-model",route="*"') == 33
            assert sample(text, "responses_gateway_tokens_total",
                          'direction="output",model="fake-model",route="*"') == 21
            assert sample(text, "responses_gateway_responses_in_flight") == 0

            # one stream held open by its upstream: counted in flight until its client leaves
            upstream.enqueue(Stream([*text_stream(["Hel"], finish_reason=None, done=False), Sleep(60)]))
            with http.stream("POST", "/v1/responses", json={"model": "fake-model", "input": "hi", "stream": True},
                             headers={"connection": "close"}) as held:
                lines = held.iter_lines()  # kept: a dropped iterator would close the response
                for line in lines:
                    if "response.output_text.delta" in line:
                        break
                assert sample(scrape(url), "responses_gateway_responses_in_flight") == 1
        assert upstream.wait_disconnect(timeout=20)
        deadline = time.monotonic() + 20
        while sample(scrape(url), "responses_gateway_responses_in_flight") != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sample(scrape(url), "responses_gateway_responses_in_flight") == 0
    finally:
        stop(proc)
