"""What the server serves: the notes tools on a store, the seed's demo, an upstream MCP server's
tools (the proxy). Services read the store; they speak no wire of their own."""
