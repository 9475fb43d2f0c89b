"""Results: aggregates, reports, comparisons, the list of runs and what a run leaves behind."""
