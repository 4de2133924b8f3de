"""`judge monitor`: live traces received or followed, sampled, judged in windows, and
alerts on real drops only."""
