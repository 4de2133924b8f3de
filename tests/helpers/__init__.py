"""What several test modules share: data, scripted fake models, ways to run judge (no tests
live here)."""
