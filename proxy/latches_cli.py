"""`latchgate latches ...`: show, reset, expire, export and import latches in a state file.

These work on the snapshot file, so they are for a stopped proxy or for moving latches between
machines; a running proxy is managed through its admin routes (it would overwrite the file on its
next change). `--upstream NAME` needs `--config` to know which endpoint the name stands for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from .capabilities import LatchStore, endpoint_id
from .config import ConfigError, load_toml
from .snapshots import load_file, save_file
from .timespec import parse_duration


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latchgate latches",
        description="Operate on the latches in a state file.",
        allow_abbrev=False,  # as for the main command: no flag is read from a prefix
    )
    p.add_argument(
        "--config", type=Path, help="config file (for its state_file and upstream names)"
    )
    p.add_argument("--state-file", type=Path, help="state file; default ./latchgate-state.json")
    sub = p.add_subparsers(dest="command", required=True)
    _command(sub, "show", "print the latches as JSON")
    reset = _command(sub, "reset", "forget latches (all, one upstream, or one model)")
    reset.add_argument("--upstream", help="upstream name (needs --config)")
    reset.add_argument("--model", help="only this model")
    expire = _command(sub, "expire", "forget latches older than a duration")
    expire.add_argument("--older-than", required=True, help="e.g. 7d, 12h, 30m, 3600s")
    export = _command(sub, "export", "write the latches to FILE")
    export.add_argument("file", type=Path)
    imp = _command(sub, "import", "merge the latches in FILE (only ever latches off)")
    imp.add_argument("file", type=Path)
    return p


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
) -> argparse.ArgumentParser:
    """One subcommand; each is its own parser, so each must refuse abbreviations itself."""
    return sub.add_parser(name, help=text, allow_abbrev=False)


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
    names: dict[str, str] = {}
    state = args.state_file
    try:
        if args.config is not None:
            settings = load_toml(args.config)
            names = {u.name: endpoint_id(u.base_url, u.api_key) for u in settings.upstreams}
            state = state or settings.state_file
        state = state or Path("latchgate-state.json")
        store = _load(state)
        if args.command == "show":
            print(
                orjson.dumps(
                    {"state_file": str(state), "endpoints": store.describe()},
                    option=orjson.OPT_INDENT_2,
                ).decode()
            )
            return 0
        if args.command == "reset":
            eid = None
            if args.upstream is not None:
                if args.upstream not in names:
                    raise ConfigError(
                        f"--upstream {args.upstream!r}: not an upstream in the "
                        "config; pass --config with the file that names it"
                    )
                eid = names[args.upstream]
            removed = store.reset(eid, args.model)
            save_file(state, store.to_snapshot())
            print(f"reset {removed} latch entr{'y' if removed == 1 else 'ies'} in {state}")
            return 0
        if args.command == "expire":
            try:
                seconds = parse_duration(args.older_than)
            except ValueError as exc:
                raise ConfigError(f"--older-than: {exc}") from None
            removed = store.expire(seconds)
            save_file(state, store.to_snapshot())
            print(f"expired {removed} latch entr{'y' if removed == 1 else 'ies'} in {state}")
            return 0
        if args.command == "export":
            save_file(args.file, store.to_snapshot())
            print(f"exported latches from {state} to {args.file}")
            return 0
        if args.command == "import":
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
    except ConfigError as exc:
        print(f"latchgate: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"latchgate: {exc}", file=sys.stderr)
        return 1
    return 2
