"""The decisions, as pure functions on plain data: negotiation and refusal classification, schemas,
structured output, sizing and windows, overflow mapping, retries.
"""
