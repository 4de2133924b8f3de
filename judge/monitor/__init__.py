"""`judge monitor`: live traces received or followed, sampled, judged, kept in windows."""
