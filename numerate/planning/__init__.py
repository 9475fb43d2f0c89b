"""Planning: which cases a run asks, in what order, and when a point has enough answers."""
