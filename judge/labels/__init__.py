"""Agreement of a judge with people's labels: label checks, measures, and the run."""
