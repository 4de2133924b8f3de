"""The LLM-judged metrics: registry, judges, prompts, pure scorers and custom metrics."""
