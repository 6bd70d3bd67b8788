"""Access policies narrow as documented, survive storage, and every public method has a scope."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import batchgate.v1
from batchgate.services.common import errors
from batchgate.services.common.access_policy import (
    ALL_SCOPES,
    METHOD_SCOPES,
    UNSCOPED_METHODS,
    Feature,
    Policy,
    Scope,
    parse_scopes,
    require_feature,
    require_scope,
)
from batchgate.services.common.guardrail_config import GuardrailConfig, PiiKind
from batchgate.v1 import batches_pb2, files_pb2, models_pb2, results_pb2


def _public_methods() -> set[str]:
    """Every method of every public (`batchgate.v1`) service, whichever proto declares it."""
    modules = [
        importlib.import_module(f"batchgate.v1.{info.name}")
        for info in pkgutil.iter_modules(batchgate.v1.__path__)
        if info.name.endswith("_pb2")
    ]
    assert {batches_pb2, files_pb2, results_pb2, models_pb2} <= set(modules)
    return {
        f"/{service.full_name}/{method.name}"
        for module in modules
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def test_every_public_method_is_scoped_or_open_on_purpose() -> None:
    public = _public_methods()
    assert sorted(public - set(METHOD_SCOPES) - UNSCOPED_METHODS) == [], "add them to METHOD_SCOPES"
    assert set(METHOD_SCOPES) | UNSCOPED_METHODS <= public


def test_a_missing_scope_is_403_and_unknown_methods_are_closed() -> None:
    require_scope("/batchgate.v1.BatchService/ListBatches", frozenset({Scope.BATCHES_READ}))
    require_scope("/batchgate.v1.ModelsService/ListModels", frozenset())
    for method in ("/batchgate.v1.FilesService/CreateFile", "/batchgate.v1.NewService/Anything"):
        with pytest.raises(errors.ApiError) as caught:
            require_scope(method, frozenset({Scope.FILES_READ}))
        assert (caught.value.status, caught.value.code) == (403, "insufficient_scope")


def test_scopes_parse_strictly() -> None:
    assert parse_scopes(None) == ALL_SCOPES
    assert parse_scopes("batches:read, files:write") == {Scope.BATCHES_READ, Scope.FILES_WRITE}
    with pytest.raises(ValueError, match="unknown scope 'batches:admin'"):
        parse_scopes("batches:admin")


def test_a_key_only_narrows_its_project() -> None:
    project = Policy(
        allowed_models=frozenset({"a", "b"}), max_records=100, features=frozenset({Feature.WORKFLOWS})
    )
    key = Policy(allowed_models=frozenset({"b", "c"}), max_records=500, expedited=False)
    narrowed = project.narrowed_by(key)
    assert narrowed.allowed_models == {"b"}
    assert narrowed.max_records == 100
    assert narrowed.expedited is False
    assert narrowed.features == {Feature.WORKFLOWS}  # features are the project's
    assert Policy().narrowed_by(key).allowed_models == {"b", "c"}
    assert project.narrowed_by(Policy()) == project


def test_policies_round_trip_through_storage() -> None:
    policy = Policy(
        allowed_models=frozenset(),
        max_concurrent_batches=3,
        expedited=False,
        retention_days=0,
        guardrails=GuardrailConfig(block_patterns=(("t", r"\d+"),), redact=frozenset({PiiKind.IBAN})),
    )
    assert Policy.from_json(policy.to_json()) == policy
    assert Policy().to_json() is None and Policy.from_json(None) == Policy()


def test_features_are_off_until_a_project_turns_them_on() -> None:
    with pytest.raises(errors.ApiError) as caught:
        require_feature(Policy(), Feature.WORKFLOWS)
    assert (caught.value.status, caught.value.code) == (409, "feature_disabled")
    require_feature(Policy(features=frozenset({Feature.WORKFLOWS})), Feature.WORKFLOWS)
