"""What each worker process of `strictcall serve --workers N` runs, made from the settings its
parent put in the environment (`strictcall.server.app.WORKER_ENV`): uvicorn imports `app` (a
factory) and `Protocol` from here in every spawned worker.

Imported anywhere else (no settings), `Protocol` is the default guarded protocol and `app`
refuses to run.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

from strictcall.audit.log import AuditRetention
from strictcall.identity.settings import load_settings
from strictcall.server._uvicorn import guarded_protocol
from strictcall.server.app import WORKER_ENV, build_app
from strictcall.server.edge import EdgeLimits, OriginPolicy
from strictcall.server.router import RpcApp
from strictcall.services.policy_file import load_holder
from strictcall.storage import open_store

_SETTINGS: Final[dict[str, Any] | None] = (
    json.loads(os.environ[WORKER_ENV]) if WORKER_ENV in os.environ else None
)
_EDGE: Final = EdgeLimits(**_SETTINGS["edge"]) if _SETTINGS is not None else EdgeLimits()

Protocol: Final = guarded_protocol(_EDGE)
"""uvicorn's httptools protocol, coalesced and guarded by the parent's edge limits."""


def app() -> RpcApp:
    """This worker's app, on its own store (uvicorn's factory).

    Raises:
        RuntimeError: not started by `serve_workers` (no settings in the environment).
        StoreUnavailable: the store cannot be opened (the worker fails to start).
    """
    if _SETTINGS is None:
        raise RuntimeError(
            f"a worker needs ${WORKER_ENV}, set by strictcall.server.app.serve_workers"
        )
    origins = OriginPolicy(frozenset(_SETTINGS["origins"]), loopback=_SETTINGS["loopback"])
    path = _SETTINGS.get("policy")
    policy = None if path is None else load_holder(path)  # checked by the parent already
    oauth = _SETTINGS.get("oauth")  # absent: a parent that predates the [oauth] block
    settings = None if oauth is None else load_settings(**oauth)
    audit = _SETTINGS.get("audit")  # absent or null: keep every row
    return build_app(
        open_store(_SETTINGS["db"]),
        origins=origins,
        edge=_EDGE,
        close_store=True,
        open_to_operators=_SETTINGS["open_to_operators"],
        policy=policy,
        oauth=settings,
        audit_retention=None if audit is None else AuditRetention(**audit),
    )
