"""The issuer's signing keys: its metadata and JWKS fetched once at start (in the background),
kept, and fetched again when a token names a `kid` not among them, at most once per
`refresh_interval_s` (after a failed fetch, at most once per `FAILURE_BACKOFF_S`), never per
request; an hour-old set is refreshed in the background while still used."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from strictcall.identity.fetch import ProviderClient, ProviderMetadata, ProviderUnavailable
from strictcall.identity.settings import OAuthSettings

FAILURE_BACKOFF_S: Final = 2.0
MAX_AGE_S: Final = 3600.0

log = logging.getLogger("strictcall")


class KeyCache:
    """The JWKS by `kid` (a key without one under ""), and the provider's metadata."""

    def __init__(
        self,
        settings: OAuthSettings,
        client: ProviderClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock
        self.keys: dict[str, Mapping[str, Any]] = {}
        self.metadata: ProviderMetadata | None = None
        self.loaded = False
        """Whether a JWKS was ever fetched."""
        self.generation = 0
        """Counts the key sets that differed from the one before (verified tokens are then
        checked again)."""
        self._fetched_at = -float("inf")
        self._attempted_at = -float("inf")
        self._failing = False
        self._refreshing: asyncio.Task[bool] | None = None

    @property
    def failing(self) -> bool:
        """Whether the last fetch failed."""
        return self._failing

    @property
    def refreshing(self) -> bool:
        """Whether a fetch is under way."""
        return self._refreshing is not None

    def retry_after_s(self) -> float:
        """How long until a fetch may be tried again."""
        backoff = FAILURE_BACKOFF_S if self._failing else self._settings.refresh_interval_s
        return max(0.0, self._attempted_at + backoff - self._clock())

    def may_refresh(self) -> bool:
        """Whether an unknown `kid` may fetch the JWKS now."""
        return self.retry_after_s() == 0.0

    def stale(self) -> bool:
        return self.loaded and self._clock() - self._fetched_at > MAX_AGE_S

    async def refresh(self) -> bool:
        """Fetch the metadata (until it was once) and the JWKS; callers at once share one
        fetch. True when the keys are fresh."""
        if self._refreshing is None:
            self._refreshing = asyncio.get_running_loop().create_task(self._fetch())
        task = self._refreshing
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._refreshing is task:
                self._refreshing = None

    def refresh_soon(self) -> None:
        """Start a refresh in the background, unless one runs."""
        if self._refreshing is None:
            self._refreshing = asyncio.get_running_loop().create_task(self._fetch())
            self._refreshing.add_done_callback(self._forget)

    async def aclose(self) -> None:
        """Stop a fetch under way (the server is stopping)."""
        task = self._refreshing
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _forget(self, task: asyncio.Task[bool]) -> None:
        if self._refreshing is task:
            self._refreshing = None

    async def _fetch(self) -> bool:
        self._attempted_at = self._clock()
        settings = self._settings
        try:
            if self.metadata is None:
                self.metadata = await self._client.metadata(settings.issuer, settings.metadata_url)
            document = await self._client.get_json(self.metadata.jwks_uri)
            keys = _keys_of(document)
        except ProviderUnavailable as exc:
            if not self._failing:
                log.warning(
                    "strictcall: the identity provider %s cannot be reached (%s); its tokens"
                    " are answered auth_unavailable until it can",
                    settings.issuer,
                    exc,
                )
            self._failing = True
            return False
        if self._failing:
            log.warning("strictcall: the identity provider %s answers again", settings.issuer)
        self._failing = False
        self._fetched_at = self._attempted_at
        if keys != self.keys:
            self.keys = keys
            self.generation += 1
        self.loaded = True
        return True


def _keys_of(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The signing keys of a JWKS by kid: public keys only (no `oct`), `use` absent or `sig`.

    Raises:
        ProviderUnavailable: the document is not a JWKS.
    """
    listed = document.get("keys")
    if not isinstance(listed, list):
        raise ProviderUnavailable("the provider's JWKS has no keys array")
    keys: dict[str, Mapping[str, Any]] = {}
    for key in listed:
        if not isinstance(key, dict) or key.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if key.get("use", "sig") != "sig":  # absent means any use
            continue
        kid = key.get("kid", "")
        if isinstance(kid, str) and kid not in keys:
            keys[kid] = key
    return keys
