"""The Prefect server numerate's flows report to: found, or started in the background or for one
command, waited for, and stopped (lifecycle); the server itself (serverd)."""
