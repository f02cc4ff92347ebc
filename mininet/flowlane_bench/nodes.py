"""The parts of Mininet's objects this package uses, as types (Mininet ships none).

Debian's ``mininet`` has no annotations, so everything it returns is ``Any``
to mypy.  These protocols name what a network, a node and an interface must
offer here, so a misspelt method or a wrong argument is a type error rather
than an ``AttributeError`` in the middle of a run.  Mininet's classes match
them structurally; nothing here is imported by Mininet or subclasses it.

Standard library only: ``flowlane_bench.topologies`` uses it under ``mn`` too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any, Protocol


class Link(Protocol):
    """A link between two interfaces (``mininet.link.Link``)."""

    intf1: Intf
    intf2: Intf


class Intf(Protocol):
    """An interface of a node (``mininet.link.Intf``)."""

    name: str
    node: Node
    link: Link | None


class Node(Protocol):
    """A host or a switch (``mininet.node.Node``): a shell in its own namespace."""

    name: str

    def cmd(self, *args: str, **kwargs: Any) -> str: ...

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[str]: ...

    def IP(self) -> str: ...  # noqa: N802  (Mininet's name)

    def intfNames(self) -> list[str]: ...  # noqa: N802

    def intfList(self) -> list[Intf]: ...  # noqa: N802

    def defaultIntf(self) -> Intf: ...  # noqa: N802


class Net(Protocol):
    """A Mininet network (``mininet.net.Mininet``)."""

    hosts: Sequence[Node]
    switches: Sequence[Node]

    def get(self, name: str) -> Node: ...

    def configLinkStatus(self, src: str, dst: str, status: str) -> None: ...  # noqa: N802

    def stop(self) -> None: ...
