"""Webhook signatures: what batchgate sends verifies with the snippet README gives receivers."""

from __future__ import annotations

import time

from batchgate.services.results.webhook_events import signature, signed_headers
from tests.webhook_receiver import readme_verifier


def test_signed_event_verifies_with_the_readme_snippet() -> None:
    verify = readme_verifier()
    body = b'{"id":"batch_1","object":"batch.event","type":"batch.completed"}'
    headers = signed_headers("whsec_abc", "evt_1", body, int(time.time()))
    assert headers["Batchgate-Event-Id"] == "evt_1"
    assert verify("whsec_abc", headers, body)
    assert not verify("whsec_other", headers, body)
    assert not verify("whsec_abc", headers, body + b" ")


def test_stale_or_malformed_signatures_are_refused() -> None:
    verify = readme_verifier()
    body = b"{}"
    old = signed_headers("s", "evt_1", body, int(time.time()) - 3600)
    assert not verify("s", old, body)
    assert not verify("s", {"Batchgate-Timestamp": "x", "Batchgate-Signature": "v1=00"}, body)
    assert not verify("s", {}, body)


def test_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    # A fixed vector, so the scheme receivers rely on cannot drift unnoticed.
    assert (
        signature("k", 1_700_000_000, b"{}")
        == "v1=c6ef4734033cee2367414a0939385eca0397754aa7a59716da7463a9298b5146"
    )
