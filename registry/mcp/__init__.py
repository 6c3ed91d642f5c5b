"""The MCP endpoint: JSON-RPC envelope, dispatch table, handlers, transports."""
