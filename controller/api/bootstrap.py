"""The first admin token: made when the store has none, written where its owner alone reads it.

Every API process tries at start-up; the store's script lets exactly one
create it, so two processes starting together cannot both mint an admin.
With Redis down the attempt is repeated until Redis answers.

A token file belongs to one store. The store has no live token when this
runs, so a token already in the file is another store's (a persistent stack
beside an ephemeral one) or one that expired: it is never overwritten, and
the new token goes to a file named after this store, which the log names.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from controller.auth.files import read_token_file, store_token_file, write_token_file
from controller.store.errors import StoreUnavailableError
from controller.store.tokens import BOOTSTRAP_NAME, TokenStore

LOG = logging.getLogger("flowlane.api")
RETRY_S = 2.0


def choose_token_file(path: Path, store_id: str) -> Path:
    """``path`` unless it holds a token already (another store's): then this store's own."""
    try:
        taken = read_token_file(path) is not None
    except (OSError, UnicodeDecodeError):
        taken = True  # unreadable: not ours to replace
    return store_token_file(path, store_id) if taken else path


def _mint(tokens: TokenStore, path: Path, ttl_s: float | None) -> Path | None:
    secret = tokens.bootstrap(ttl_s=ttl_s)
    if secret is None:
        return None
    target = choose_token_file(path, tokens.store_id())
    write_token_file(target, secret)
    return target


async def bootstrap_admin(tokens: TokenStore, path: Path, ttl_s: float | None = None) -> bool:
    """Create the admin token if no live token exists (True), writing it to ``path`` (or, when
    ``path`` holds another token, to this store's own file beside it). ``ttl_s``: it expires
    that long after its creation (None: never)."""
    while True:
        try:
            target = await run_in_threadpool(_mint, tokens, path, ttl_s)
        except StoreUnavailableError:
            await asyncio.sleep(RETRY_S)
            continue
        if target is None:
            return False
        expiry = f", expiring in {ttl_s:g} s" if ttl_s is not None else " that never expires"
        if target == path:
            LOG.warning(
                "the store had no API token: created admin token %r%s; it is in %s (readable by"
                " its owner only). Make others with `flowlane token create`.",
                BOOTSTRAP_NAME,
                expiry,
                path,
            )
        else:
            LOG.warning(
                "the store had no API token: created admin token %r%s; %s holds another"
                " store's (or an expired) token and was left as it is, so the new one is in %s"
                " (readable by its owner only): flowlane --token-file %s ...",
                BOOTSTRAP_NAME,
                expiry,
                path,
                target,
                target,
            )
        return True
