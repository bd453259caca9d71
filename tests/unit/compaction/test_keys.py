"""compaction/keys.py: a summary sealed for one owner opens only for that owner, under a configured key."""

from __future__ import annotations

import pytest

from responses_gateway.compaction.keys import Keyring
from responses_gateway.errors import APIError

A, B = "a" * 32, "b" * 32


def test_a_sealed_summary_opens_for_its_owner_only():
    ring = Keyring([A])
    token = ring.seal("the summary", "alice")
    assert token.startswith("rgc1.") and "the summary" not in token
    assert ring.open(token, "alice", "input[0]") == "the summary"
    with pytest.raises(APIError) as caught:
        ring.open(token, "bob", "input[0]")
    assert caught.value.param == "input[0].encrypted_content" and "another API key" in caught.value.message


def test_rotation_the_first_key_seals_every_key_opens():
    old = Keyring([A]).seal("old summary", "o")
    rotated = Keyring([B, A])
    assert rotated.open(old, "o", "x") == "old summary"
    new = rotated.seal("new summary", "o")
    assert Keyring([B]).open(new, "o", "x") == "new summary"
    with pytest.raises(APIError, match="rotated out"):
        Keyring([A]).open(new, "o", "x")


@pytest.mark.parametrize("token", ["not a token", "rgc1.abc", 42, None, "rgc0.x.y"])
def test_anything_else_is_a_400_naming_the_item(token):
    with pytest.raises(APIError) as caught:
        Keyring([A]).open(token, "o", "input[3]")
    assert caught.value.status == 400 and caught.value.code == "invalid_encrypted_content"


def test_an_altered_token_does_not_open():
    ring = Keyring([A])
    token = ring.seal("s", "o")
    prefix, kid, blob = token.split(".")
    flipped = blob[:-3] + ("A" if blob[-3] != "A" else "B") + blob[-2:]
    with pytest.raises(APIError, match="altered"):
        ring.open(f"{prefix}.{kid}.{flipped}", "o", "x")
