"""The first admin token: made when the store has none, written where its owner alone reads it.

Every API process tries at start-up; the store's script lets exactly one
create it, so two processes starting together cannot both mint an admin.
With Redis down the attempt is repeated until Redis answers.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from controller.auth.files import write_token_file
from controller.store.errors import StoreUnavailableError
from controller.store.tokens import BOOTSTRAP_NAME, TokenStore

LOG = logging.getLogger("flowlane.api")
RETRY_S = 2.0


async def bootstrap_admin(tokens: TokenStore, path: Path) -> bool:
    """Create the admin token if no token exists (True), writing it to ``path``."""
    while True:
        try:
            secret = await run_in_threadpool(tokens.bootstrap)
        except StoreUnavailableError:
            await asyncio.sleep(RETRY_S)
            continue
        if secret is None:
            return False
        await run_in_threadpool(write_token_file, path, secret)
        LOG.warning(
            "the store had no API token: created admin token %r; it is in %s (readable by"
            " its owner only). Make others with `flowlane token create`.",
            BOOTSTRAP_NAME,
            path,
        )
        return True
