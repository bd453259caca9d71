"""The stream checker lives in the package (responses_gateway.conformance.rules), shared with `check`."""

from responses_gateway.conformance.rules import (  # noqa: F401
    KNOWN_EVENT_TYPES,
    RULES,
    Frame,
    StreamResult,
    check_stream,
    inspect_stream,
    parse_sse,
)
