#!/usr/bin/env bash
# Install the pinned Claude Code CLI (npm package @anthropic-ai/claude-code) into the repo-local
# prefix .cache/claude, for the tests that drive the real CLI against latchgate's Anthropic
# Messages API front.
#
# Since 2.1.x the package carries no JavaScript program: bin/claude.exe is a small placeholder
# that the package's postinstall script (install.cjs) replaces, by hard link or copy, with the
# native binary (a Bun-compiled executable, about 400 MB) from the per-platform package npm pulls
# through optionalDependencies (@anthropic-ai/claude-code-<os>-<arch>[-musl]). An install with
# optional dependencies omitted (npm --omit=optional, or a lockfile made on another platform),
# or with install scripts skipped (--ignore-scripts, an npm that does not run unapproved install
# scripts), leaves the placeholder in place, so this script checks the native package is there,
# runs install.cjs itself when the placeholder is still there, and checks that the binary runs.
# The package declares engines.node >=22, but the native binary does not use the system Node at
# run time; npm only warns (EBADENGINE) with Debian 12's Node 18/20, which is fine.
#
# Idempotent: an install whose version matches and whose binary runs is kept as it is.
# Installs nodejs and npm with apt-get only when node or npm is missing (a fresh Debian machine,
# as root). The last line on stdout is the claude binary path; progress goes to stderr.
# Env: LATCHGATE_CLAUDE_PREFIX (default <repo>/.cache/claude).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLAUDE_VERSION="2.1.332"
PREFIX="${LATCHGATE_CLAUDE_PREFIX:-$ROOT/.cache/claude}"
BIN="$PREFIX/node_modules/.bin/claude"
PKG="$PREFIX/node_modules/@anthropic-ai/claude-code"

log() { echo "install-claude: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# 1) node and npm, and the platform (os, arch)
# shellcheck source=scripts/npm-cli-common.sh
. "$ROOT/scripts/npm-cli-common.sh"

# 2) the platform's native package name, as install.cjs resolves it
libc=""
if [ "$os" = linux ] && [ "$(node -p 'process.report.getReport().header.glibcVersionRuntime ? 1 : 0')" = 0 ]; then
  libc="-musl"
fi
NATIVE_PKG="$PREFIX/node_modules/@anthropic-ai/claude-code-$os-$arch$libc"

# The placeholder is a few hundred bytes; the native binary is hundreds of MB.
is_native() { [ -f "$1" ] && [ "$(stat -Lc %s "$1")" -gt 1000000 ]; }

installed_ok() {
  [ -x "$BIN" ] || return 1
  [ -f "$NATIVE_PKG/package.json" ] || return 1
  is_native "$PKG/bin/claude.exe" || return 1
  [ "$(node -p "require('$PKG/package.json').version" 2>/dev/null)" = "$CLAUDE_VERSION" ] || return 1
  "$BIN" --version 2>/dev/null | grep -qF "$CLAUDE_VERSION"
}

if installed_ok; then
  log "@anthropic-ai/claude-code $CLAUDE_VERSION already installed in $PREFIX"
else
  log "installing @anthropic-ai/claude-code@$CLAUDE_VERSION into $PREFIX"
  mkdir -p "$PREFIX"
  # --include=optional: the native binary is an optional dependency; make sure a user-level
  # npm config (omit=optional) cannot drop it.
  npm install --prefix "$PREFIX" --no-audit --no-fund --no-update-notifier --save-exact --loglevel=error \
    --include=optional "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
  [ -f "$NATIVE_PKG/package.json" ] \
    || die "the native package @anthropic-ai/claude-code-$os-$arch$libc was not installed (optional dependencies omitted?)"
  if ! is_native "$PKG/bin/claude.exe"; then
    # npm skipped the postinstall script: run it (it links the native binary over the placeholder).
    log "postinstall did not run; running install.cjs"
    (cd "$PKG" && node install.cjs) >&2
    is_native "$PKG/bin/claude.exe" || die "$PKG/bin/claude.exe is still the placeholder, not the native binary"
  fi
  installed_ok || die "$BIN does not run or does not report version $CLAUDE_VERSION"
fi
log "$("$BIN" --version)"
echo "$BIN"
