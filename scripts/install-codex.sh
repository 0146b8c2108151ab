#!/usr/bin/env bash
# Install the pinned OpenAI Codex CLI (npm package @openai/codex) into the repo-local prefix
# .cache/codex, for the tests that drive the real CLI against latchgate's Responses API front.
#
# The package's bin/codex.js is a small Node launcher; the real program is a native Rust binary
# shipped in a per-platform package that npm pulls through optionalDependencies (aliased as
# @openai/codex-<os>-<arch> -> @openai/codex@<version>-<os>-<arch>). An install with optional
# dependencies omitted (npm --omit=optional, or a lockfile made on another platform) leaves a
# launcher that fails at run time, so this script checks that the native binary is there and runs.
#
# Idempotent: an install whose version matches and whose binary runs is kept as it is.
# Installs nodejs and npm with apt-get only when node or npm is missing (a fresh Debian machine,
# as root). The last line on stdout is the codex binary path; progress goes to stderr.
# Env: LATCHGATE_CODEX_PREFIX (default <repo>/.cache/codex).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CODEX_VERSION="0.169.0"
PREFIX="${LATCHGATE_CODEX_PREFIX:-$ROOT/.cache/codex}"
BIN="$PREFIX/node_modules/.bin/codex"

log() { echo "install-codex: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# 1) node and npm, and the platform (os, arch)
# shellcheck source=scripts/npm-cli-common.sh
. "$ROOT/scripts/npm-cli-common.sh"

# 2) the platform's native package name, as the launcher resolves it
NATIVE_PKG="$PREFIX/node_modules/@openai/codex-$os-$arch"

installed_ok() {
  [ -x "$BIN" ] || return 1
  [ -f "$NATIVE_PKG/package.json" ] || return 1
  [ "$(node -p "require('$PREFIX/node_modules/@openai/codex/package.json').version" 2>/dev/null)" = "$CODEX_VERSION" ] || return 1
  "$BIN" --version 2>/dev/null | grep -qF "$CODEX_VERSION"
}

if installed_ok; then
  log "@openai/codex $CODEX_VERSION already installed in $PREFIX"
else
  log "installing @openai/codex@$CODEX_VERSION into $PREFIX"
  mkdir -p "$PREFIX"
  # --include=optional: the native binary is an optional dependency; make sure a user-level
  # npm config (omit=optional) cannot drop it.
  npm install --prefix "$PREFIX" --no-audit --no-fund --no-update-notifier --save-exact --loglevel=error \
    --include=optional "@openai/codex@$CODEX_VERSION" >&2
  [ -f "$NATIVE_PKG/package.json" ] \
    || die "the native package @openai/codex-$os-$arch was not installed (optional dependencies omitted?)"
  installed_ok || die "$BIN does not run or does not report version $CODEX_VERSION"
fi
log "$("$BIN" --version)"
echo "$BIN"
