"""Continuous monitoring: live traces judged in windows, and alerts on real drops only."""
