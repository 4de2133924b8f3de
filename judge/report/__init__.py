"""Reports: report.html and compare.html, and the retrieval-first diagnosis."""
