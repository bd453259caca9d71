"""The output pipe's reader: each cell's share ends at its marker (wherever the reads split it), the first
bytes are kept, the rest counted, and a flood is reported once."""

from __future__ import annotations

import asyncio

from responses_gateway.tools.code_interpreter.channel import Output
from responses_gateway.tools.code_interpreter.sandbox import Limits

MARKER = b"\0END-abc-"


def test_a_cells_output_ends_at_its_marker_however_the_reads_split_it():
    async def main():
        flooded = []
        output = Output(MARKER, Limits(output_bytes=10, stop_output_bytes=30), lambda: flooded.append(1))
        stream = b"hello\nworld\n" + MARKER + b"1\0" + b"later"
        for i in range(len(stream)):  # one byte at a time: markers split anywhere
            output.data_received(stream[i:i + 1])
        assert output.cell_end(1).done()
        text, dropped = output.take()
        assert (text, dropped) == ("hello\nworl", 2)
        output.data_received(b"x" * 80)  # (the reader holds back the length of a marker, no more)
        assert flooded == [1]
        output.data_received(b"x" * 80)
        assert flooded == [1]  # reported once
        output.connection_lost(None)
        text, dropped = output.take()
        assert text == "laterxxxxx" and dropped == 5 + 160 - 10

    asyncio.run(main())
