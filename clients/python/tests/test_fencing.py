"""The lockstream-fencing-token header, made and parsed as every client does it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockstream import InvalidArgument
from lockstream.fencing import FENCING_HEADER, fencing_metadata, format_fencing_token, parse_fencing_token

FIXTURE = Path(__file__).resolve().parents[3] / "test" / "fixtures" / "fencing-headers.json"


def test_agrees_with_every_client() -> None:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert fixture["header"] == FENCING_HEADER
    for case in fixture["cases"]:
        token = int(case["token"])
        assert format_fencing_token(case["name"], token) == case["value"]
        assert parse_fencing_token(case["value"]) == (case["name"], token)


@pytest.mark.parametrize(
    "value",
    ["", "orders", "orders:", ":7", "orders:-1", "orders:+7", "orders:18446744073709551616", "orders:7x", "%zz:7", "%ff:7", "a b:7", "café:7"],
)
def test_refuses_malformed_values(value: str) -> None:
    with pytest.raises(InvalidArgument, match=FENCING_HEADER):
        parse_fencing_token(value)


def test_metadata_pair() -> None:
    assert fencing_metadata("orders/42", 7) == (FENCING_HEADER, "orders%2F42:7")
