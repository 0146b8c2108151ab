"""What an operator sees: the event seam, Prometheus metrics, structured logs, and the masking of
secrets in all of them.
"""
