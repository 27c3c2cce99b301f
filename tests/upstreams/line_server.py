"""What the hand-written stdio upstreams share: JSON-RPC read line by line from stdin, each
request answered on stdout with the result `answer` gives (notifications are not answered)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def serve(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Answer each request read from stdin until it closes."""
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
