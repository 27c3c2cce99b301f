"""The server: composes the gateway, the wires, admission and operations into one ASGI app, and
runs it. One module a concern:

    app.py         composition: the app for a gateway and a store; serve(), serve_workers()
    router.py      routes: /rpc, /healthz, the operator's paths, the mounts (/mcp)
    admission.py   who may reach a wire: Origin, bearer token, calls in flight (ASGI middleware)
    edge.py        the edge's policy values: origins admitted, deadlines, limits
    listen.py      the listening sockets, bound before the server starts
    processes.py   what each worker process of --workers N runs
    ops.py         the operator's page, stats and metrics paths
    proxy.py       `strictcall proxy` served over HTTP or stdio
    _uvicorn.py    the one home of uvicorn's internals: its server, its supervisor, and the
                   HTTP protocol with one write per response, answers made in place and the
                   connection's deadlines
"""
