"""Who may do what: roles, tokens as the API sees them, and tenant scopes. Pure.

Three roles, each allowed everything the one before it is:

- ``viewer``: every read;
- ``operator``: jobs (register, renew, delete);
- ``admin``: policy, rollback, tokens and the audit log.

A token may belong to a tenant. A tenant's networks come from the active
policy (``tenants: {NAME: {networks: [CIDR…]}}``), so an operator token of a
tenant registers jobs only for endpoints inside them and sees only its own
jobs and flows.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TOKEN_PREFIX = "flt_"
"""Marks flowlane tokens (secret scanners and humans recognise them)."""


class Role(enum.IntEnum):
    viewer = 1
    operator = 2
    admin = 3

    @staticmethod
    def parse(text: str) -> Role:
        try:
            return Role[text]
        except KeyError:
            names = ", ".join(role.name for role in Role)
            raise ValueError(f"unknown role {text!r} (roles: {names})") from None


def new_secret() -> str:
    """A fresh bearer token: 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    """What the store keeps instead of the token (SHA-256: the token is random, not a password)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a request, once its token checked out."""

    name: str
    role: Role
    tenant: str | None = None

    def may(self, needed: Role) -> bool:
        return self.role >= needed


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks_of(cidrs: Iterable[str]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def inside(address: str, networks: Sequence[Network]) -> bool:
    """Whether an address or a whole prefix (``10.0.0.0/24``) lies inside one of ``networks``."""
    prefix = ipaddress.ip_network(address, strict=False)
    return any(
        prefix.version == network.version and prefix.subnet_of(network)  # type: ignore[arg-type]
        for network in networks
    )
