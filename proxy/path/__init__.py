"""One request's journey: the job and its state, the attempt loop, the stream and whole relays, and
the agent layer that asks `proxy.agent` and `proxy.toolcalls` what to do.
"""
