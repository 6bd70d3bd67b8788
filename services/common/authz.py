"""Who may call what between batchgate processes: the one table, and the caller's identity.

Every process holds a certificate of the cluster CA whose DNS subject alternative name is its
identity (`batchgate certs issue --service NAME`). Servers require one (mutual TLS), so a
caller without a certificate of this CA never gets past the handshake; `ALLOWED_CALLERS`
then decides per method. A method missing from the table is refused to everyone (and a unit
test fails until the table names its callers), so a new internal RPC is closed by default.
Public methods keep their API-key check on top (`batchgate.services.common.auth`).

README.md's "Internal ports and identities" table is generated from `ALLOWED_CALLERS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

INGEST = "ingest"
SCHEDULER = "scheduler"
RESULTS = "results"
EXECUTOR = "executor"
ENVOY = "envoy"
OPERATOR = "operator"
IDENTITIES = (INGEST, SCHEDULER, RESULTS, EXECUTOR, ENVOY, OPERATOR)
"""Every identity `batchgate certs init` issues a certificate for. `operator` is for people and
tools on the cluster's side (`batchgate health`, grpcurl, executor status)."""

ANY_METHOD = "*"

ALLOWED_CALLERS: Mapping[str, frozenset[str]] = {
    # scheduler: the work queue
    "/batchgate.internal.v1.SchedulerService/SubmitBatch": frozenset({INGEST}),
    "/batchgate.internal.v1.SchedulerService/CancelBatch": frozenset({INGEST}),
    "/batchgate.internal.v1.SchedulerService/LeaseItems": frozenset({EXECUTOR}),
    "/batchgate.internal.v1.SchedulerService/Heartbeat": frozenset({EXECUTOR}),
    "/batchgate.internal.v1.SchedulerService/ReleaseItems": frozenset({EXECUTOR}),
    "/batchgate.internal.v1.SchedulerService/WatchClosingBatches": frozenset({EXECUTOR}),
    "/batchgate.internal.v1.SchedulerService/GrantBudget": frozenset({EXECUTOR}),
    # results: recording outcomes, finalizing, spend for budgets
    "/batchgate.internal.v1.RecorderService/RecordResults": frozenset({EXECUTOR}),
    "/batchgate.internal.v1.RecorderService/FinalizeBatch": frozenset({SCHEDULER, RESULTS}),
    "/batchgate.internal.v1.SpendService/GetSpend": frozenset({INGEST}),
    # ingest: the runs of recurring templates, spawned when the scheduler finds them due
    "/batchgate.internal.v1.TemplateRunsService/SpawnRun": frozenset({SCHEDULER}),
    # executor: what it is doing
    "/batchgate.internal.v1.ExecutorService/GetExecutorStatus": frozenset({OPERATOR}),
    # the public API (an API key is checked on top), health and reflection
    "/batchgate.v1.FilesService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.BatchService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.ResultsService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.ModelsService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.MessageBatchService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.MessageBatchResultsService/*": frozenset({ENVOY, OPERATOR}),
    "/batchgate.v1.BatchTemplateService/*": frozenset({ENVOY, OPERATOR}),
    "/grpc.reflection.v1.ServerReflection/*": frozenset({ENVOY, OPERATOR}),
    "/grpc.reflection.v1alpha.ServerReflection/*": frozenset({ENVOY, OPERATOR}),
    "/grpc.health.v1.Health/*": frozenset(IDENTITIES),
}


def allowed_callers(method: str) -> frozenset[str]:
    """Identities that may call `method` (`/package.Service/Method`); empty: nobody."""
    exact = ALLOWED_CALLERS.get(method)
    if exact is not None:
        return exact
    service = method.rsplit("/", 1)[0]
    return ALLOWED_CALLERS.get(f"{service}/{ANY_METHOD}", frozenset())


def peer_identities(auth_context: Mapping[str, Sequence[bytes]]) -> frozenset[str]:
    """The identities a verified peer certificate names (its DNS SANs that are identities).

    gRPC fills `x509_subject_alternative_name` only after verifying the chain against the
    cluster CA; without TLS the context is empty and so is the answer."""
    names = {
        value.decode(errors="replace") for value in auth_context.get("x509_subject_alternative_name", ())
    }
    return frozenset(names & set(IDENTITIES))


def permitted(method: str, auth_context: Mapping[str, Sequence[bytes]]) -> bool:
    return bool(allowed_callers(method) & peer_identities(auth_context))
