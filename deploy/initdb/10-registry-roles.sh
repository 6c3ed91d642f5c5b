#!/bin/sh
# Runs once when the compose PostgreSQL container initialises its data directory.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v owner_password="$REGISTRY_OWNER_PASSWORD" -f /registry/roles.sql
