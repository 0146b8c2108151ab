"""`latchgate latches ...`: show, reset, expire, export and import latches in a state file.

These work on the snapshot file, so they are for a stopped proxy or for moving latches between
machines; a running proxy is managed through its admin routes (it would overwrite the file on its
next change). `--upstream NAME` needs `--config` to know which endpoint the name stands for.
`--config` and `--state-file` are taken before or after the subcommand: the help and the README
write them after it, and that is where people type them.
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

DEFAULT_STATE = "latchgate-state.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latchgate latches",
        description="Operate on the latches in a state file. --config and --state-file may go "
        "before or after the subcommand.",
        allow_abbrev=False,  # as for the main command: no flag is read from a prefix
    )
    _where(p, "")
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
    names: dict[str, str] = {}
    try:
        _merge_where(args)
        state = args.state_file
        if args.config is not None:
            settings = load_toml(args.config)
            names = {u.name: endpoint_id(u.base_url, u.api_key) for u in settings.upstreams}
            state = state or settings.state_file
        state = state or Path(DEFAULT_STATE)
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
