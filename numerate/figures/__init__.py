"""Figures: what numerate's plots and pages show, prepared once, and the matplotlib plots."""
