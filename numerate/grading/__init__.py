"""Grading: an answer's outcome, and how each model's part of a run ended."""
