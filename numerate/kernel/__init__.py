"""The leaf kernel every layer shares: named errors, statistics and atomic file writes.

It imports nothing of the project (manifolds, numgen, numerate, tasks, flows), so the leaves
(manifolds, numgen) and the core can all use it.
"""
