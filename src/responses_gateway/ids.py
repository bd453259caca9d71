"""Ids shaped like OpenAI's (prefix + 48 hex digits), so clients that sniff prefixes keep working."""

import os


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(24).hex()}"
