"""Records that need a feature the caller's project has not turned on (`Policy.features`): a
workflow record (`batchgate.workflow`) refuses the whole create with 409 `feature_disabled`,
before anything of the batch is published, instead of becoming a per-record rejection: the
operator, not the record, has to change. A workflow record that is also malformed refuses it
the same way: answered `invalid_workflow` alone, it was mended only to meet the 409 next."""

from __future__ import annotations

from batchgate.services.common.access_policy import Feature, Policy, require_feature
from batchgate.services.common.workflow_config import INVALID_CODE, WORKFLOW_KEY
from batchgate.services.ingest.validation import Accepted, Rejected


def needs_features(outcome: Accepted | Rejected, policy: Policy) -> Accepted | Rejected:
    """`outcome` unchanged; raises the 409 when it is a workflow record (valid or not) and
    workflows are off."""
    accepted = isinstance(outcome, Accepted) and outcome.url_section == WORKFLOW_KEY
    if accepted or (isinstance(outcome, Rejected) and outcome.code == INVALID_CODE):
        require_feature(policy, Feature.WORKFLOWS)
    return outcome
