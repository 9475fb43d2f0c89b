"""The sweep's configuration, the process's environment and what a run records of where it ran."""
