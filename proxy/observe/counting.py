"""Events counted into their metric series: the listener every request's events go through.

Every decision on the request path is an `Event`; here one becomes a counter move. The rules
(which series an event kind moves, and which of its labels make the series' key) are data that
`proxy.observe.metrics` writes once, with the plain dicts its collectors render at scrape time.

This is a module of its own so it can be compiled with mypyc (proxy/compiled.py): it runs for
every event of every request, and as `Metrics` methods a recovered call's one event took five
interpreted calls, some 8,000 instructions (issue 17). `metrics` itself cannot be compiled: its
collectors derive from prometheus_client's classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, final

from proxy.observe.events import Event, RequestEvents

OTHER: Final = "other"  # the label of a value left out, or one that would grow the series

# Label values -> the number counted for them: a counter's series, shared with its collector.
Series = dict[tuple[str, ...], float]

DROPPABLE_FAMILIES = (("mirostat", "mirostat*"), ("dry_", "dry_*"), ("xtc_", "xtc_*"))


def field_label(field: str, allowed: frozenset[str]) -> str:
    """The `field` label for a dropped field: itself if droppable, its family, or "other"."""
    if field in allowed:
        return field
    for prefix, family in DROPPABLE_FAMILIES:
        if field.startswith(prefix):
            return family
    return OTHER


def count(values: Series, key: tuple[str, ...], amount: float) -> None:
    """Count `amount` for `key` (a series made at 0 for a negative one: a counter does not go
    down, and an event's count never made a request fail)."""
    values[key] = values.get(key, 0.0) + (amount if amount > 0 else 0)


@final
class ModelLabels:
    """The `model` label: the first `cap` distinct names, then "other". A client may invent
    model names, and each would be a series on every scrape. A name with a secret in it is
    labelled masked (`mask`, set to the proxy's masker), and one too long to be a model's
    "other"."""

    # Real names (a Hugging Face repo and a quantisation) run to about a hundred characters,
    # and a label is sent on every scrape of every series.
    MAX_LABEL: Final = 256

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.mask: Callable[[str], str] = str
        self.own: set[str] = set()  # names that are their own label (the fast path)
        self._relabelled: dict[str, str] = {}  # names that are not: a secret in them, too long

    def label(self, model: str) -> str:
        """The label of `model`, remembered: the same name is always labelled alike."""
        if model in self.own:
            return model
        label = self._relabelled.get(model)
        if label is not None:
            return label
        if len(self.own) + len(self._relabelled) >= self.cap:
            return OTHER
        label = OTHER if len(model) > self.MAX_LABEL else self.mask(model)
        if label == model:
            self.own.add(model)
        else:
            self._relabelled[model] = label
        return label


@final
class Rule:
    """What events of one kind move: `values`, keyed by the request's upstream, its model's
    label when `by_model`, then the event's labels named in `keys` ("other" for one it lacks).

    Two kinds need more: a dropped field's name is limited to `fields` (a server names the
    field, so it could grow the series without bound), and a context rescue also counts the
    tokens it removed (its `before` less its `after`) in `removed`.
    """

    def __init__(
        self,
        values: Series,
        keys: tuple[str, ...] = (),
        *,
        by_model: bool = True,
        fields: frozenset[str] | None = None,
        removed: Series | None = None,
    ) -> None:
        self.values = values
        self.keys = keys
        self.by_model = by_model
        self.fields = fields
        self.removed = removed


@final
class EventCounter:
    """The `RequestEvents` listener: each event moves the series its kind's rule names; kinds
    with no rule are not counted."""

    def __init__(self, models: ModelLabels, rules: dict[str, Rule]) -> None:
        self.models = models
        self.rules = rules

    def on_event(self, req: RequestEvents, event: Event) -> None:
        rule = self.rules.get(event.kind)
        if rule is None:
            return
        labels = event.labels
        if rule.by_model:
            head: tuple[str, ...] = (req.upstream, self.models.label(req.model))
        else:
            head = (req.upstream,)
        if rule.fields is not None:
            key = (*head, field_label(labels.get("field", OTHER), rule.fields))
        else:
            key = (*head, *[labels.get(name, OTHER) for name in rule.keys])
        count(rule.values, key, event.count)
        if rule.removed is not None:
            removed = int(labels.get("before", 0)) - int(labels.get("after", 0))
            if removed > 0:
                count(rule.removed, head, removed)
