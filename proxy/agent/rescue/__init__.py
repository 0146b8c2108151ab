"""Context rescue: a transcript made small enough to fit its window, instead of being refused.

Two ways, cheap first, both done only when a request would otherwise be refused:
`pruning` clears old tool results to a one-line stub; `compaction` folds the oldest stretch of
the conversation into a summary the model writes (`summary` builds that side request and reads
its answer). Both rewrite the prefix, so a prompt cache is lost; `plans` makes the rewrite
repeatable, so the next turn of the same conversation is rewritten byte for byte the same way and
the cache is lost once. `transcript` holds what all of them read of a message. Everything here
is pure: the path (`proxy.path.rescue`) does the asking, the remembering and the telling.
"""
