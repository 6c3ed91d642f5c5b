"""The REST admin API and the health endpoints: thin routes, one service call each."""
