"""The composer's half that serves gateway-run tools: their runners and annotators, the calls waiting to run,
and the `Calls` a runner is given (tools/frame.py).

`composer.Composer` is this class and the state machine of text, reasoning and client calls together: one
object numbers every event of a response, so nothing here builds an event the composer does not number. This
half needs three things of the other, which the composer provides: `next_seq` (the next sequence number),
`open_item` (an output item added, with its `output_item.added`) and `close_text` (the open message or
reasoning item closed before a tool's item opens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .frame import Annotator, Events, Item, OpenItem, Runner, Spec, WholeCalls


class ToolCalls:
    """Gateway-run tools in one response (a mixin of `composer.Composer`)."""

    runners: dict[str, Runner]  # by kit name
    annotators: tuple[Annotator, ...]  # citations of the answer text
    pending: list[OpenItem]  # calls whose arguments are whole, awaiting execution
    shown: Callable[[Item], Item] | None  # a gateway item as the client sees it
    kept: Callable[[Item], Item] | None  # a gateway item as the store keeps it

    notes: list[tuple[int, list[Item]]]  # calls the model got wrong (WholeCalls): where, and what it is to see
    retry: bool  # a step whose only calls were such: the model gets another step

    def init_tools(self) -> None:
        self.notes = []
        self.retry = False
        self.runners = {}
        self.annotators = ()
        self.pending = []
        self.shown = None
        self.kept = None

    # -- what the composer provides ------------------------------------------------------------------

    def next_seq(self) -> int:
        raise NotImplementedError

    def open_item(self, out: Events, kind: str, item: Item, runner: Runner | None = None) -> OpenItem:
        raise NotImplementedError

    def close_text(self, out: Events, status: str) -> None:
        raise NotImplementedError

    def output_items(self) -> list[Item]:
        raise NotImplementedError

    # -- set up by the tool loop (tools/loop.py) and respond.py ----------------------------------------

    def use(self, name: str, runner: Runner) -> None:
        """Calls that adapters mark as run by kit `name` make their items through `runner`."""
        self.runners[name] = runner
        annotator = runner.annotator()
        if annotator is not None:
            self.annotators = (*self.annotators, annotator)

    def show(self, shown: Callable[[Item], Item]) -> None:
        """`shown`: a gateway-run tool's item as the client sees it (what `include` leaves out is stored only)."""
        self.shown = shown

    def keep(self, kept: Callable[[Item], Item]) -> None:
        """`kept`: a gateway-run tool's item as the store keeps it (a large part kept apart: `stored`)."""
        self.kept = kept

    def model_output(self, output: list[Item]) -> list[Item]:
        """This response's output as the model is to see it on its next step: the client's items, and in their
        places the calls it got wrong with why (never shown to the client)."""
        if not self.notes:
            return output
        merged: list[Item] = []
        at = 0
        for index, items in self.notes:
            merged += output[at:index]
            merged += items
            at = index
        return merged + output[at:]

    def take_retry(self) -> bool:
        """Whether the last step needs another for the model to correct a call (and forget it was asked)."""
        retry, self.retry = self.retry, False
        return retry

    def take_pending(self) -> list[OpenItem]:
        """The gateway-run calls whose arguments are whole, to be run now (each stays open until `end_call`)."""
        pending, self.pending = self.pending, []
        return pending

    # -- Calls (tools/frame.py): what runners use --------------------------------------------------------

    def call_events(self, call: OpenItem, specs: Sequence[Spec]) -> Events:
        out: Events = []
        self.send_specs(out, call, specs)
        return out

    def end_call(self, call: OpenItem, status: str | None, specs: Sequence[Spec] = ()) -> Events:
        if status is not None:
            call.item["status"] = status
        out: Events = []
        self.send_specs(out, call, specs)
        self.item_done(out, call)
        return out

    def fail_call(self, call: OpenItem, message: str) -> Events:
        if call.runner is None:
            raise ValueError("fail_call is for gateway-run calls")
        status, specs = call.runner.failed(call, message)
        return self.end_call(call, status, specs)

    def add_item(self, name: str, item: Item, specs: Sequence[Spec] = (), *,
                 run: bool = False) -> tuple[OpenItem, Events]:
        out: Events = []
        self.close_text(out, "completed")
        call = self.open_item(out, "gateway", item, self.runners.get(name))
        self.send_specs(out, call, specs)
        if run:
            self.pending.append(call)
        return call, out

    # -- the events of a tool's items ---------------------------------------------------------------------

    def send_specs(self, out: Events, call: OpenItem, specs: Sequence[Spec]) -> None:
        """A tool's own events about its item, numbered."""
        for kind, fields in specs:
            out.append({"type": kind, "sequence_number": self.next_seq(), "item_id": call.id,
                        "output_index": call.index, **fields})

    def item_done(self, out: Events, item: OpenItem) -> None:
        """`response.output_item.done` of a tool's item, as the client is shown it."""
        item.done = True
        shown = self.shown
        out.append({"type": "response.output_item.done", "sequence_number": self.next_seq(),
                    "output_index": item.index, "item": item.item if shown is None else shown(item.item)})

    def start_whole_call(self, runner: Runner, item: Item) -> OpenItem:
        """A call of a `WholeCalls` runner: kept aside, out of the output, until its arguments are whole."""
        return OpenItem("gateway", item, -1, runner)

    def close_tool_call(self, out: Events, call: OpenItem, runner: Runner, status: str) -> None:
        """The model finished writing a gateway-run call: run it (it waits in `pending`), or close it as it
        stands (the tool says so); a call cut short (the response ends) fails — or, never shown (a whole
        call), is dropped."""
        if call.index < 0 and isinstance(runner, WholeCalls):
            if status != "completed":
                return  # the client never saw it
            made = runner.finished(call)
            if isinstance(made, tuple):  # the model got it wrong: it sees why on its next step, the client nothing
                self.notes.append((len(self.output_items()), list(made)))
                self.retry = True
                return
            call = self.open_item(out, "gateway", made, runner)
        if status != "completed":
            out.extend(self.fail_call(call, "The response ended before the call could run."))
            return
        specs, run = runner.complete(call)
        self.send_specs(out, call, specs)
        if run:
            self.pending.append(call)  # stays open until the gateway has run it
        else:
            self.item_done(out, call)
