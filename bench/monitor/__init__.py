"""Monitoring: the drop alerts on simulated streams (and the monitor's own costs)."""
