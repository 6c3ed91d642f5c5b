"""Database layer: engine, transactions, models, driver-error translation, embedded server."""
