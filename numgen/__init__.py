"""NumGen: number sense of text-to-image models (added by the NumGen issue)."""
