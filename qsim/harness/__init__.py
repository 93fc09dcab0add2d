"""Runs a Scenario against the real engine (producers, synthetic handlers, processes, signals)."""
