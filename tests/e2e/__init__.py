"""End-to-end tests: a real LiteLLM proxy process in front of a recording upstream."""
