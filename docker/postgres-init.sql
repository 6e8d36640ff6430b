-- Runs once when the PostgreSQL volume is created: one database for MLflow, one for Optuna.
CREATE DATABASE mlflow;
CREATE DATABASE optuna;
