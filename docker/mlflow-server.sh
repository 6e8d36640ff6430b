#!/bin/sh
# Starts the MLflow server on the compose network. The database password comes from the
# environment (PGPASSWORD, read by libpq), never from the repository or the URL.
set -eu
: "${PGPASSWORD:?PGPASSWORD is not set (docker/.env)}"
: "${PGHOST:=postgres}" "${PGUSER:=satsweep}" "${MLFLOW_DB:=mlflow}"
exec mlflow server \
  --backend-store-uri "postgresql+psycopg2://${PGUSER}@${PGHOST}:5432/${MLFLOW_DB}" \
  --artifacts-destination /mlartifacts \
  --serve-artifacts \
  --host "${MLFLOW_HOST:-0.0.0.0}" --port 5000 \
  --workers "${MLFLOW_WORKERS:-2}" \
  --allowed-hosts "${MLFLOW_ALLOWED_HOSTS:-mlflow,mlflow:5000,localhost,localhost:5000,127.0.0.1,127.0.0.1:5000}"
