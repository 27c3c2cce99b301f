"""The client side: seed 000's strict reader of a JSON-RPC reply (`reply`, no I/O) and the HTTP
client built on it (`http`, needs the `client` extra). Nothing here imports the server side."""
