"""Skills: a tenant's agent instructions as versioned folders of files (the MCP Skills extension)."""
