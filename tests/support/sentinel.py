"""A Redis primary, its replica and three Sentinels on free ports, for the failover tests.

The machinery lives in ``flowlane_bench.sentinel``, shared with ``bench_sentinel`` (ten
primary kills in a row); a node that never says what it should fails the test with
``SentinelError`` and the end of its log.
"""

from __future__ import annotations

from flowlane_bench.sentinel import (
    DOWN_AFTER_MS,
    FAILOVER_TIMEOUT_MS,
    MASTER,
    Node,
    SentinelError,
    SentinelSet,
)

__all__ = ["DOWN_AFTER_MS", "FAILOVER_TIMEOUT_MS", "MASTER", "Node", "SentinelError", "SentinelSet"]
