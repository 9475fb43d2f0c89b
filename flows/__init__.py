"""Prefect flows: wiring only (added by the pipeline issue)."""
