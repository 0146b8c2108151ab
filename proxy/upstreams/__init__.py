"""Talking to model servers: the pooled client per upstream, its probes and kind detection."""
