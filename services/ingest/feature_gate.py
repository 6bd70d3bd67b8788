"""Records that need a feature the caller's project has not turned on (`Policy.features`): a
record naming a workflow (`body.batchgate.workflow`) refuses the whole create with 409
`feature_disabled`, before anything of the batch is published, instead of becoming a
per-record rejection: the operator, not the record, has to change. A workflow record rejected
for any reason (its workflow, its model, its body) refuses it the same way: answered with its
own rejection alone, it was mended only to meet the 409 next."""

from __future__ import annotations

import orjson

from batchgate.services.common.access_policy import Feature, Policy, require_feature
from batchgate.services.common.workflow_config import WORKFLOW_KEY, names_workflow, raw_workflow
from batchgate.services.ingest.validation import Accepted, Rejected


def needs_features(outcome: Accepted | Rejected, raw: bytes, policy: Policy) -> Accepted | Rejected:
    """`outcome` (of the record `raw`) unchanged; raises the 409 when the record names a
    workflow, valid or not, and workflows are off."""
    if _names_workflow(outcome, raw):
        require_feature(policy, Feature.WORKFLOWS)
    return outcome


def _names_workflow(outcome: Accepted | Rejected, raw: bytes) -> bool:
    """An accepted record says so; a rejected one (rare) is read again, after a byte search."""
    if isinstance(outcome, Accepted):
        return outcome.url_section == WORKFLOW_KEY
    if not names_workflow(raw):
        return False
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    body = record.get("body") if isinstance(record, dict) else None
    return isinstance(body, dict) and raw_workflow(body)[0]
