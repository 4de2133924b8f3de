"""The LLM boundary: model configuration, transport, retries, structured output, cache, usage."""
