"""Production traces as judge rows (OTLP with OpenInference or GenAI attributes, Langfuse,
Phoenix), and judge's scores back beside their traces as trace events."""
