"""The table of who may call what: complete, real, documented, and read from the certificate."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool

from batchgate.internal.v1 import executor_pb2, recorder_pb2, scheduler_pb2, spend_pb2
from batchgate.internal.v1 import templates_pb2 as internal_templates_pb2
from batchgate.services.common import authz
from batchgate.services.ingest import reflection
from batchgate.v1 import batches_pb2, files_pb2, results_pb2, templates_pb2
from tools.config_docs import AUTHZ_BEGIN, AUTHZ_END, README, authz_block, readme_block

INTERNAL_FILES = (executor_pb2, recorder_pb2, scheduler_pb2, spend_pb2, internal_templates_pb2)
PUBLIC_FILES = (batches_pb2, files_pb2, results_pb2, templates_pb2)


def _methods(modules: tuple[object, ...]) -> set[str]:
    return {
        f"/{service.full_name}/{method.name}"
        for module in modules
        for service in module.DESCRIPTOR.services_by_name.values()  # type: ignore[attr-defined]
        for method in service.methods
    }


def test_every_internal_method_names_its_callers() -> None:
    missing = sorted(m for m in _methods(INTERNAL_FILES) if not authz.allowed_callers(m))
    assert missing == [], "add these to authz.ALLOWED_CALLERS (and run `make gen`)"


def test_the_table_names_only_real_methods_and_identities() -> None:
    for key, callers in authz.ALLOWED_CALLERS.items():
        service, method = key.removeprefix("/").split("/")
        pool = descriptor_pool.Default() if service.startswith("batchgate.") else reflection.public_pool()
        found = pool.FindServiceByName(service)
        assert method == authz.ANY_METHOD or found.FindMethodByName(method) is not None, key
        assert callers and callers <= set(authz.IDENTITIES), key


def test_each_identity_gets_only_what_it_needs() -> None:
    def may(identity: str) -> set[str]:
        every = _methods(INTERNAL_FILES) | _methods(PUBLIC_FILES)
        return {m.rsplit("/", 1)[1] for m in every if identity in authz.allowed_callers(m)}

    assert may("executor") == {
        "LeaseItems",
        "Heartbeat",
        "ReleaseItems",
        "WatchClosingBatches",
        "GrantBudget",
        "RecordResults",
    }
    assert may("ingest") == {"SubmitBatch", "CancelBatch", "GetSpend"}
    assert may("scheduler") == {"FinalizeBatch", "SpawnRun"}
    assert may("results") == {"FinalizeBatch"}
    assert may("envoy") == {m.rsplit("/", 1)[1] for m in _methods(PUBLIC_FILES)}
    health = "/grpc.health.v1.Health/Check"
    assert authz.allowed_callers(health) == frozenset(authz.IDENTITIES)
    assert authz.allowed_callers("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo") == {
        "envoy",
        "operator",
    }
    assert authz.allowed_callers("/batchgate.internal.v1.SchedulerService/NoSuchMethod") == frozenset()


def test_the_identity_is_the_verified_certificates_dns_names() -> None:
    context = {
        "x509_subject_alternative_name": [b"executor", b"host.example"],
        "x509_common_name": [b"ingest"],
    }
    assert authz.peer_identities(context) == {"executor"}
    assert authz.permitted("/batchgate.internal.v1.SchedulerService/LeaseItems", context)
    assert not authz.permitted("/batchgate.internal.v1.SchedulerService/SubmitBatch", context)
    assert authz.peer_identities({}) == frozenset()  # no TLS: nobody
    assert not authz.permitted("/grpc.health.v1.Health/Check", {})


def test_readme_lists_the_table() -> None:
    assert readme_block(README.read_text(), AUTHZ_BEGIN, AUTHZ_END) == authz_block(), "run `make gen`"


def test_reflection_describes_the_public_api_only() -> None:
    pool = reflection.public_pool()
    assert sorted(reflection.public_services()) == [
        "batchgate.v1.BatchService",
        "batchgate.v1.BatchTemplateService",
        "batchgate.v1.FilesService",
        "batchgate.v1.MessageBatchResultsService",
        "batchgate.v1.MessageBatchService",
        "batchgate.v1.ModelsService",
        "batchgate.v1.ResultsService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ]
    for name in reflection.public_services():
        assert pool.FindServiceByName(name).full_name == name
    v1 = pool.FindServiceByName("grpc.reflection.v1.ServerReflection").methods_by_name["ServerReflectionInfo"]
    assert v1.input_type.full_name == "grpc.reflection.v1.ServerReflectionRequest"
    for internal in (
        "batchgate.internal.v1.SchedulerService",
        "batchgate.internal.v1.LeaseItemsRequest",
        "batchgate.internal.v1.TemplateRunsService",
    ):
        with pytest.raises(KeyError):
            pool.FindFileContainingSymbol(internal)
