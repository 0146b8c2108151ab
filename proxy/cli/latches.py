"""`latchgate latches ...`: show, reset, expire, export and import latches in a state file.

These work on the snapshot file, so they are for a stopped proxy or for moving latches between
machines; a running proxy is managed through its admin routes (it would overwrite the file on its
next change). `--upstream NAME` is looked up in `--config` when one is given, else among the
names the state file recorded for its endpoints (`--upstream` mode records "default").
`--config` and `--state-file` are taken before or after the subcommand: the help and the README
write them after it, and that is where people type them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from proxy.settings import DEFAULT_STATE_FILE, ConfigError, load_toml
from proxy.state.latches import LatchStore, endpoint_id
from proxy.state.snapshots import load_file, save_file
from proxy.timespec import parse_duration

DEFAULT_STATE = DEFAULT_STATE_FILE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latchgate latches",
        description="Operate on the latches in a state file. --config and --state-file may go "
        "before or after the subcommand.",
        allow_abbrev=False,  # as for the main command: no flag is read from a prefix
    )
    _where(p, "")
    sub = p.add_subparsers(dest="command", required=True)
    show = _command(sub, "show", "say what each upstream and model refused, and since when")
    show.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead, in the same shape as earlier versions (kept for scripts): "
        '{"state_file", "endpoints"}, each endpoint as GET /admin/latches lists it; there a '
        "latch reads false when refused and times are Unix seconds",
    )
    reset = _command(sub, "reset", "forget latches (all, one upstream, or one model)")
    reset.add_argument(
        "--upstream",
        metavar="NAME",
        help="only this upstream: a name in --config, else the name latches show prints",
    )
    reset.add_argument("--model", help="only this model")
    expire = _command(sub, "expire", "forget latches older than a duration")
    expire.add_argument("--older-than", required=True, help="e.g. 7d, 12h, 30m, 3600s")
    export = _command(sub, "export", "write the latches to FILE")
    export.add_argument("file", type=Path)
    imp = _command(sub, "import", "merge the latches in FILE (only ever latches off)")
    imp.add_argument("file", type=Path)
    return p


def _where(p: argparse.ArgumentParser, prefix: str) -> None:
    """--config and --state-file, on the main parser (prefix "") or a subcommand ("sub_").

    A subcommand's copy writes to its own attribute: argparse would otherwise let the
    subcommand's default (None) overwrite a value given before the subcommand.
    """
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        dest=f"{prefix}config",
        help="config file (for its state_file and upstream names)",
    )
    p.add_argument(
        "--state-file",
        type=Path,
        metavar="PATH",
        dest=f"{prefix}state_file",
        help=f"state file; default: the config's state_file, else ./{DEFAULT_STATE}",
    )


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
) -> argparse.ArgumentParser:
    """One subcommand; each is its own parser, so each refuses abbreviations itself and takes
    --config / --state-file after its name (where `--help` and the README put them)."""
    command = sub.add_parser(name, help=text, allow_abbrev=False)
    _where(command, "sub_")
    return command


def _merge_where(args: argparse.Namespace) -> None:
    """Fold the options given after the subcommand into those given before it."""
    for name, flag in (("config", "--config"), ("state_file", "--state-file")):
        before, after = getattr(args, name), getattr(args, f"sub_{name}")
        if before is not None and after is not None and before != after:
            raise ConfigError(f"{flag} given twice ({before} and {after}); give it once")
        setattr(args, name, before if before is not None else after)


def _load(path: Path) -> LatchStore:
    store = LatchStore()
    data, warnings = load_file(path)
    for warning in warnings:
        print(f"latchgate: {warning}", file=sys.stderr)
    if data is not None:
        for warning in store.merge_snapshot(data):
            print(f"latchgate: {warning}", file=sys.stderr)
    return store


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        _merge_where(args)
        names: dict[str, str] = {}
        state = args.state_file
        if args.config is not None:
            settings = load_toml(args.config)
            names = {u.name: endpoint_id(u.identity, u.api_key) for u in settings.upstreams}
            state = state or settings.state_file
        state = state or Path(DEFAULT_STATE)
        return _COMMANDS[args.command](args, state, names, _load(state))
    except ConfigError as exc:
        print(f"latchgate: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"latchgate: {exc}", file=sys.stderr)
        return 1


def _show(args: argparse.Namespace, state: Path, names: dict[str, str], store: LatchStore) -> int:
    if args.json:
        # Exactly what `latches show` printed before it printed words, for the scripts that
        # read it; a new shape would have needed a new flag and broken them anyway.
        listing = {"state_file": str(state), "endpoints": store.describe()}
        print(orjson.dumps(listing, option=orjson.OPT_INDENT_2).decode())
        return 0
    lines = store.describe_in_words()
    if not lines:
        print(f"no latches in {state}: every request is sent as the client wrote it")
        return 0
    print("\n".join([f"latches in {state}:", *lines]))
    return 0


def _reset(args: argparse.Namespace, state: Path, names: dict[str, str], store: LatchStore) -> int:
    if args.upstream is None:
        removed = store.reset(None, args.model)
    else:
        eids = _endpoints_named(args.upstream, names, store)
        removed = sum(store.reset(eid, args.model) for eid in eids)
    save_file(state, store.to_snapshot())
    print(f"reset {_entries(removed)} in {state}")
    return 0


def _endpoints_named(name: str, names: dict[str, str], store: LatchStore) -> list[str]:
    """The endpoint ids an upstream name stands for.

    The config's name wins: it says what the name means now. Without one (`--upstream` mode, or
    an upstream since removed from the config) the name each endpoint was saved under is used;
    it is what `latches show` prints, so it is what an operator types back.
    """
    if name in names:
        return [names[name]]
    listing = store.describe()
    found = [entry["endpoint"] for entry in listing if entry["upstream"] == name]
    if found:
        return found
    known = sorted(set(names) | {entry["upstream"] for entry in listing if entry["upstream"]})
    raise ConfigError(
        f"--upstream {name!r}: no upstream of that name in the state file"
        + (" or the config" if names else "")
        + (f" (known: {', '.join(known)})" if known else " (it holds no named upstreams)")
    )


def _expire(args: argparse.Namespace, state: Path, names: dict[str, str], store: LatchStore) -> int:
    try:
        seconds = parse_duration(args.older_than)
    except ValueError as exc:
        raise ConfigError(f"--older-than: {exc}") from None
    removed = store.expire(seconds)
    save_file(state, store.to_snapshot())
    print(f"expired {_entries(removed)} in {state}")
    return 0


def _export(args: argparse.Namespace, state: Path, names: dict[str, str], store: LatchStore) -> int:
    save_file(args.file, store.to_snapshot())
    print(f"exported latches from {state} to {args.file}")
    return 0


def _import(args: argparse.Namespace, state: Path, names: dict[str, str], store: LatchStore) -> int:
    data, warnings = load_file(args.file)
    for warning in warnings:
        print(f"latchgate: {warning}", file=sys.stderr)
    if data is None:
        raise ConfigError(f"{args.file}: nothing to import")
    for warning in store.merge_snapshot(data):
        print(f"latchgate: {warning}", file=sys.stderr)
    save_file(state, store.to_snapshot())
    print(f"imported latches from {args.file} into {state}")
    return 0


def _entries(count: int) -> str:
    return f"{count} latch entr{'y' if count == 1 else 'ies'}"


_COMMANDS: dict[str, Callable[[argparse.Namespace, Path, dict[str, str], LatchStore], int]] = {
    "show": _show,
    "reset": _reset,
    "expire": _expire,
    "export": _export,
    "import": _import,
}
