"""Tool calls: recovery of calls written as text, argument repair, and the stream processor."""
