"""Stability probes: perturb the inputs or the sampling, rerun the judges, check the scores."""
