"""The client side: the strict reader of a JSON-RPC reply (`reply`, no I/O) and the HTTP
client built on it (`http`, needs the `client` extra). Nothing here imports the server side."""
