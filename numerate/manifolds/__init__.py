"""Test manifolds: pure generators and graders, one module per manifold, and a registry.

Nothing in this package imports Prefect or does I/O.
"""
