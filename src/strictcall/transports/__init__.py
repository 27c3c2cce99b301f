"""Bytes to calls and answers to bytes: JSON-RPC, ASGI, MCP (stdio and streamable HTTP, both
taking the server's options as one value, `serving.Serving`), the providers' agent-loop turns.
No store, no policy: a transport asks the gateway and writes what it answers."""
