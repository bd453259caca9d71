"""The spec validator (responses_gateway.conformance.schema) bound to the repository's copy of the spec document (tests/data/spec)."""

from __future__ import annotations

import os
from pathlib import Path

from responses_gateway.conformance.schema import DIFFERENCES, SpecValidator  # noqa: F401
from tests.support.recordings import DATA_DIR

SPEC_PATH = Path(os.environ.get("OPENRESPONSES_SPEC", DATA_DIR / "spec" / "openresponses-openapi.json"))
SPEC = SpecValidator(SPEC_PATH)

event_types = SPEC.event_types
validate_event = SPEC.validate_event
validate_response = SPEC.validate_response
validate_request = SPEC.validate_request
validate_ws_error = SPEC.validate_ws_error
