"""End-to-end tests against a real llama.cpp llama-server with a real small model."""
