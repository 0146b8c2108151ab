# latchgate: an OpenAI-compatible reverse proxy, as a small non-root container.
#
#   docker build -t latchgate .
#   docker run -p 8787:8787 -v $PWD/latchgate.toml:/config/latchgate.toml:ro \
#       -v latchgate-data:/data latchgate
#
# Config is read from /config/latchgate.toml and learned latches persist in
# /data/latchgate-state.json; both are volumes so the image itself stays stateless.
# Several replicas share their state through Redis: compose.yaml runs two of them and a Redis
# service (`--state redis://redis:6379/0`), each with one worker per core (`--workers auto`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what `pip install` needs, so edits to tests or docs do not invalidate this layer.
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY proxy ./proxy
# The `speed` extra adds uvloop (prebuilt wheels). gcc compiles the request path's hot modules
# (setup.py, proxy/compiled.py) and goes again in the same layer, with /src.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install ".[speed]" \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /src

RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin latchgate \
    && mkdir -p /config /data \
    && chown latchgate:latchgate /data

VOLUME ["/config", "/data"]
WORKDIR /data
USER latchgate

EXPOSE 8787

# slim has no curl; the standard library's urllib is enough. urlopen raises on a non-2xx answer,
# which exits non-zero and marks the container unhealthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=3)"]

CMD ["latchgate", "--config", "/config/latchgate.toml", "--host", "0.0.0.0", "--state-file", "/data/latchgate-state.json"]
