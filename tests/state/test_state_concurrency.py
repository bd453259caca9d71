"""Many conversations at once through two gateways sharing one store: no turn may lose or borrow history."""

from __future__ import annotations

import asyncio
import re

import openai

from tests.support import backends
from tests.support.fake_chat import RecordedRequest, Stream, text_stream

pg_database = backends.pg_database
backend = backends.backend
start_gateway = backends.start_gateway

MODEL = "fake-model"
CHAINS, TURNS, READERS = 50, 3, 30
ASK = re.compile(r"^chain (\d+) turn (\d+)$")


def question(chain: int, turn: int) -> str:
    return f"chain {chain} turn {turn}"


def answer(chain: int, turn: int) -> str:
    return f"answer {chain}.{turn}"


def expected_messages(chain: int, turn: int) -> list[dict]:
    messages = []
    for k in range(turn):
        messages += [{"role": "user", "content": question(chain, k)},
                     {"role": "assistant", "content": answer(chain, k)}]
    return [*messages, {"role": "user", "content": question(chain, turn)}]


def scripted(request: RecordedRequest) -> Stream:
    """Answer with text naming the chain and turn the last user message asks about."""
    last = request.body["messages"][-1]["content"]
    found = ASK.match(last)
    text = answer(int(found[1]), int(found[2])) if found else f"unexpected: {last}"
    words = text.split(" ")
    return Stream(text_stream([words[0] + " ", *words[1:]]), delay=0.003)


async def _turn(client: openai.AsyncOpenAI, streaming: bool, **kw):
    if streaming:
        async with client.responses.stream(model=MODEL, **kw) as s:
            return await s.get_final_response()
    return await client.responses.create(model=MODEL, **kw)


async def _run_chains(urls: list[str]) -> dict[tuple[int, int], object]:
    """CHAINS conversations of TURNS turns at once, alternating between the gateways at `urls`, while
    READERS other clients keep reading back finished responses (retrieve and input_items)."""
    clients = [openai.AsyncOpenAI(base_url=f"{u}/v1", api_key="unused", max_retries=0, timeout=30) for u in urls]
    finals: dict[tuple[int, int], object] = {}
    running = True

    async def chain(c: int) -> None:
        previous = None
        for t in range(TURNS):
            client = clients[(c + t) % len(clients)]  # alternate between the replicas
            final = await _turn(client, streaming=(c + t) % 2 == 0, input=question(c, t),
                                previous_response_id=previous)
            finals[c, t] = final
            previous = final.id
            # read it back at once, on the other replica, as a client checking what was stored would
            got = await clients[(c + t + 1) % len(clients)].responses.retrieve(previous)
            assert got.output_text == final.output_text

    async def reader(r: int) -> int:
        reads = 0
        while running:
            done = list(finals.items())
            if not done:
                await asyncio.sleep(0.005)
                continue
            (c, t), final = done[(r * 7919 + reads) % len(done)]
            client = clients[(r + reads) % len(clients)]
            got = await client.responses.retrieve(final.id)
            assert got.output_text == answer(c, t)
            (item,) = (await client.responses.input_items.list(final.id)).data
            assert item.content[0].text == question(c, t)
            reads += 1
        return reads

    readers = [asyncio.create_task(reader(r)) for r in range(READERS)]
    try:
        try:
            async with asyncio.timeout(45), asyncio.TaskGroup() as group:
                for c in range(CHAINS):
                    group.create_task(chain(c))
        except ExceptionGroup as failed:  # the first failure, the other chains cancelled
            raise failed.exceptions[0] from None
        finally:
            running = False
        assert sum(await asyncio.wait_for(asyncio.gather(*readers), timeout=30)) > 0
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for client in clients:
            await client.close()
    return finals


def test_fifty_concurrent_chains_keep_their_own_history(start_gateway, backend, upstream):
    replicas = [start_gateway(), start_gateway()]  # two gateways, one database
    upstream.default = scripted
    finals = asyncio.run(_run_chains([g.url for g in replicas]))

    for (c, t), final in finals.items():
        assert final.status == "completed"
        assert final.output_text == answer(c, t), (c, t)
        assert final.previous_response_id == (finals[c, t - 1].id if t else None)

    seen = {}
    for request in upstream.requests:
        messages = request.body["messages"]
        found = ASK.match(messages[-1]["content"])
        assert found, messages
        c, t = int(found[1]), int(found[2])
        assert (c, t) not in seen, f"chain {c} turn {t} reached the upstream twice"
        seen[c, t] = True
        assert messages == expected_messages(c, t), f"chain {c} turn {t} got crossed or lost history"
    assert len(seen) == CHAINS * TURNS

    assert backend.query("SELECT count(*) FROM responses") == [(CHAINS * TURNS,)]
    assert backend.consistency_problems() == []


def test_concurrent_branches_from_one_parent_do_not_see_each_other(start_gateway, backend, upstream):
    children = 30
    gw = start_gateway()
    upstream.default = scripted

    async def go():
        async with openai.AsyncOpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0,
                                      timeout=30) as client:
            parent = await client.responses.create(model=MODEL, input=question(999, 0))
            kids = await asyncio.wait_for(asyncio.gather(*(
                _turn(client, streaming=i % 2 == 0, input=question(i, 1), previous_response_id=parent.id)
                for i in range(children))), timeout=30)
            return parent, kids

    parent, kids = asyncio.run(go())
    assert [k.output_text for k in kids] == [answer(i, 1) for i in range(children)]
    parent_turn = [{"role": "user", "content": question(999, 0)}, {"role": "assistant", "content": answer(999, 0)}]
    branches = sorted(r.body["messages"][-1]["content"] for r in upstream.requests[1:])
    assert branches == sorted(question(i, 1) for i in range(children))
    for request in upstream.requests[1:]:
        assert request.body["messages"][:-1] == parent_turn
    assert backend.query("SELECT count(*) FROM responses WHERE previous_response_id = ?", parent.id) \
        == [(children,)]
