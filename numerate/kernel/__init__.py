"""The leaf kernel every stage shares: named errors (with their exit codes), statistics,
atomic file writes, files reached through no link, the progress long work reports, whether a
stop signal came.

It imports nothing else of numerate, so every stage can use it.
"""
