"""numerate: evaluation pipeline for reasoning test manifolds and NumGen, orchestrated by Prefect.

This package holds the command line and what the other packages share; it imports nothing
heavy at import time.
"""

__version__ = "0.1.0"
