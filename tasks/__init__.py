"""Prefect tasks: thin wrappers over pure code and I/O (added by the pipeline issue)."""
