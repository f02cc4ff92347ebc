"""A caller's scope: unscoped tokens see all; a tenant's see its networks; an undeclared
tenant sees nothing and may register nothing."""

from __future__ import annotations

from controller.auth.model import Principal, Role
from controller.auth.tenancy import UNSCOPED, Scope
from controller.policy.jobs import JobSpec
from controller.policy.tenants import Tenant

TENANTS = {"blue": Tenant.model_validate({"networks": ["10.1.0.0/16"]})}


def spec(*addresses: str) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "j", "class": "training", "endpoints": [{"ipv4": a} for a in addresses]}
    )


def test_an_unscoped_token_sees_and_registers_everything() -> None:
    scope = Scope.of(Principal("ops", Role.operator), TENANTS)
    assert scope is UNSCOPED and not scope.scoped
    assert scope.owns(None) and scope.owns("blue")
    assert scope.sees_flow("1.2.3.4", "5.6.7.8")
    assert scope.job_refusal(spec("172.16.0.0/12")) is None


def test_a_tenant_sees_its_jobs_and_flows_with_an_end_in_its_networks() -> None:
    scope = Scope.of(Principal("b", Role.viewer, "blue"), TENANTS)
    assert scope.owns("blue") and not scope.owns("red") and not scope.owns(None)
    assert scope.sees_flow("10.1.2.3", "8.8.8.8") and scope.sees_flow("8.8.8.8", "10.1.0.1")
    assert not scope.sees_flow("10.2.0.1", "8.8.8.8")
    assert not scope.sees_flow("garbage", "fe80::1")


def test_a_tenant_registers_prefixes_inside_its_networks_only() -> None:
    scope = Scope.of(Principal("b", Role.operator, "blue"), TENANTS)
    assert scope.job_refusal(spec("10.1.0.0/24", "10.1.255.255")) is None
    refusal = scope.job_refusal(spec("10.1.0.1", "10.0.0.0/8"))
    # A prefix wider than the tenant's network is outside it, though it contains it.
    assert refusal == (
        "endpoints[1].ipv4 10.0.0.0/8: outside tenant 'blue''s networks (10.1.0.0/16)"
    )


def test_an_undeclared_tenant_sees_and_registers_nothing() -> None:
    scope = Scope.of(Principal("g", Role.operator, "green"), TENANTS)
    assert scope.scoped and not scope.declared
    assert not scope.sees_flow("10.1.0.1", "10.1.0.2")
    assert scope.owns("green")  # jobs it registered before its tenant was removed stay visible
    refusal = scope.job_refusal(spec("10.1.0.1"))
    assert refusal is not None and "not declared in the active policy" in refusal
