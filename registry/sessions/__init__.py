"""MCP sessions of the session-era protocol revisions, kept in PostgreSQL."""
