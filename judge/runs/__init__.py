"""The run history: every finished run's record in one SQLite file (`store`), its format
history (`migrations`), and a record made from a run's output folder (`record`)."""
