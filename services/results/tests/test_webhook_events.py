"""Webhook signatures follow Standard Webhooks: the README's verifier, the `standardwebhooks`
library and the `openai` SDK all accept what batchgate sends, and refuse anything altered."""

from __future__ import annotations

import base64
import time

import openai
import pytest

from batchgate.services.common.auth import new_webhook_secret
from batchgate.services.results.webhook_events import signed_headers
from tests.webhook_receiver import readme_verifier

BODY = b'{"id":"evt_1","object":"event","type":"batch.completed","created_at":1,"data":{"id":"batch_1"}}'


def test_signed_event_verifies_with_the_readme_snippet_and_the_openai_sdk() -> None:
    verify = readme_verifier()
    secret = new_webhook_secret()
    headers = signed_headers(secret, "evt_1", BODY, int(time.time()))
    assert headers["webhook-id"] == "evt_1"
    assert verify(secret, headers, BODY)
    assert not verify(new_webhook_secret(), headers, BODY)
    assert not verify(secret, headers, BODY + b" ")
    event = openai.OpenAI(api_key="unused").webhooks.unwrap(BODY, headers, secret=secret)
    assert (event.type, event.data.id) == ("batch.completed", "batch_1")
    with pytest.raises(openai.InvalidWebhookSignatureError):
        openai.OpenAI(api_key="unused").webhooks.unwrap(BODY, headers, secret=new_webhook_secret())


def test_stale_or_malformed_signatures_are_refused() -> None:
    verify = readme_verifier()
    secret = new_webhook_secret()
    old = signed_headers(secret, "evt_1", BODY, int(time.time()) - 3600)
    assert not verify(secret, old, BODY)
    bad = {"webhook-id": "evt_1", "webhook-timestamp": str(int(time.time())), "webhook-signature": "v1,AAAA"}
    assert not verify(secret, bad, BODY)
    assert not verify(secret, {}, BODY)


def test_secret_is_whsec_base64_of_32_bytes() -> None:
    secret = new_webhook_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_signature_is_base64_hmac_sha256_over_id_timestamp_body() -> None:
    # Standard Webhooks' own test vector, so the scheme receivers rely on cannot drift unnoticed.
    headers = signed_headers(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        b'{"test": 2432232314}',
        1614265330,
    )
    assert headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
