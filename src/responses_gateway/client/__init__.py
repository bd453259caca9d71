"""A tolerant reader for OpenAI Responses API event streams: typed events and the accumulated final Response.

    from responses_gateway.client import read_stream

    reader = read_stream(resp.iter_bytes())          # bytes, str, or any (async) iterable of chunks
    for event in reader:                             # `async for` works too
        if event.type == "response.output_text.delta":
            print(event.delta, end="")
    reader.response                                  # the final Response object (a dict)

It follows the consuming rules for Responses streams, and repairs what real servers get wrong:

- SSE bytes split anywhere, CRLF line ends, comments, `event:` lines or not, `data: [DONE]` or not;
- events out of order: replayed in `sequence_number` order (a number that never comes is waited for at most
  `window` events), and correlated by `output_index` / `item_id` — a delta before its `output_item.added`
  creates the item;
- duplicate events (an already seen `sequence_number` with the same type) are dropped;
- unknown event types are passed on with `known=False` and change nothing;
- `.done` events an upstream forgot are synthesized (`synthesized=True`): parts and items are closed when the
  item ends, at the terminal event at the latest;
- text that a `.done` event, an `output_item.done` or the terminal `response.output` has but the deltas lacked
  is delivered as one synthesized delta, so the deltas always add up to the final text when they can;
- argument deltas are kept as strings (partial JSON is never parsed);
- a stream without a terminal event ends with a synthesized `response.failed` whose error says it ended early.

The events yielded form a well-formed stream (scaffold before delta, every `.added` closed by one `.done`,
exactly one terminal event), which is what the gateway's Responses upstream adapter builds on.
"""

from .accumulator import Accumulator
from .events import TERMINAL as TERMINAL  # event type -> response status, for the gateway's Responses adapter
from .events import Event
from .stream import ResponseStream, read_stream

__all__ = ["Accumulator", "Event", "ResponseStream", "read_stream"]
