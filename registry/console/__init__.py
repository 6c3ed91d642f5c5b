"""The web console at /ui: server-rendered pages over the same domain services as the REST API."""
