"""A schema is resolved within itself: no `$ref` or `$schema` reaches the network or a file
(the MCP specification: implementations MUST NOT fetch network references)."""

from __future__ import annotations

import http.server
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from strictcall.core.schema import CompiledSchema, SchemaDefinitionError
from strictcall.core.schema.compiled import OUTSIDE_REFERENCE
from strictcall.errors import JSONValue


class _Counting(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counting.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("content-type", "application/schema+json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 that serves a schema to whoever asks, and counts."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Counting.hits = []
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def outside_schemas(base: str) -> list[JSONValue]:
    return [
        {"$ref": f"{base}/s.json"},
        {"type": "object", "properties": {"a": {"$ref": f"{base}/s.json#/x"}}},
        {"$id": f"{base}/root.json", "properties": {"a": {"$ref": "other.json"}}},
        {"$schema": f"{base}/meta.json", "type": "object"},
        {"properties": {"a": {"$id": f"{base}/inner.json", "$schema": f"{base}/meta.json"}}},
        {"$ref": "file:///etc/hostname"},
        {"$ref": "file:///dev/zero"},
        {"allOf": [{"$ref": f"{base}/a.json"}], "type": "object"},
    ]


def test_a_reference_outside_the_schema_is_refused_and_nothing_is_fetched(
    schema_server: str,
) -> None:
    for schema in outside_schemas(schema_server):
        with pytest.raises(SchemaDefinitionError) as refused:
            CompiledSchema(schema)
        assert str(refused.value) == OUTSIDE_REFERENCE, schema
    assert _Counting.hits == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"$ref": "#"},
    ],
)
def test_local_references_and_bundled_meta_schemas_still_compile(schema: JSONValue) -> None:
    CompiledSchema(schema)


def test_a_schema_that_only_names_a_url_as_a_value_is_not_a_reference() -> None:
    compiled = CompiledSchema({"const": {"$ref": "http://127.0.0.1:9/x"}})
    assert compiled.is_valid({"$ref": "http://127.0.0.1:9/x"}, has_float=False)


def test_the_proxy_serves_no_tool_whose_schema_refers_outside_and_fetches_nothing(
    schema_server: str, tmp_path: Path
) -> None:
    from mcp_peers import UPSTREAMS, StdioProxy

    script = UPSTREAMS / "scripted_upstream.py"
    received = tmp_path / "received.log"
    remote = f"{schema_server}/schema.json"
    upstream = shlex.join([sys.executable, str(script), str(received), remote])
    proxy = StdioProxy(tmp_path, upstream)
    try:
        names = proxy.peer.tool_names()
        assert "remote_ref" not in names
        assert "string_id" in names  # the others are served
        reported = [line for line in proxy.stderr().splitlines() if '"remote_ref"' in line]
        assert len(reported) == 1
        assert schema_server not in reported[0]  # the upstream's URL is not echoed
    finally:
        proxy.close()
    assert _Counting.hits == []
