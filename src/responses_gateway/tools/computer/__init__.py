"""Computer use (docs/computer-use.md): OpenAI's `computer_use_preview` and `computer` tools on any vision model.

A client-run tool: the model's action becomes a `computer_call` item and the response ends for the client to
act and answer with a `computer_call_output` (a screenshot). The gateway makes the model able to drive it:

- `kit`: the declarations (both shapes), the items, what a client is shown (`include[]`), the checks of a
  request's whole input (`admit`: calls answered, screenshots within bounds, safety checks acknowledged);
- `settings`, `service`: the deployment's policy (screenshots kept in the model's context, denied domains,
  the largest screenshot, the default coordinate profile);
- `actions`: actions as OpenAI types them, checked, from the shapes models write them in (this gateway's
  `computer` function, Claude's computer tool, GUI-agent aliases);
- `profiles`: a route's coordinate profile — pixels of the image the model saw (after its own resize) or
  0..1000 / 0..999 — mapped to the display's pixels and back;
- `screens`: the screen a call acts on (the declaration's size, or the last screenshot's);
- `lowering`: earlier calls and screenshots as the route's model sees them (older screenshots left out);
- `runner`: one response's calls, shown only once whole (a call the model got wrong is never shown: the
  model sees why and tries again).
"""

NAME = "computer"
