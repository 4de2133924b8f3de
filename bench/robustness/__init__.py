"""Robustness: faults injected into the server, damage done to a cache."""
