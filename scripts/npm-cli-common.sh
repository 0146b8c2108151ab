# Sourced by install-codex.sh and install-claude.sh: what installing a native npm CLI needs on
# any machine. Expects `log` and `die` to be defined. Sets `os` and `arch` as npm's
# per-platform packages name them (linux|darwin, x64|arm64), installing nodejs and npm with
# apt-get first when either is missing (a fresh Debian machine, as root).

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "node/npm missing and no apt-get to install them"
  log "installing nodejs and npm (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
log "node $(node --version), npm $(npm --version)"

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) die "unsupported OS $(uname -s)" ;;
esac
case "$(uname -m)" in
  x86_64|amd64) arch=x64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) die "unsupported CPU $(uname -m)" ;;
esac
