"""The server: composes the gateway, the wires, admission and operations into one ASGI app, and
runs it (listeners, the edge's limits, worker processes). The one home of uvicorn's internals."""
