# `strictcall serve` as a container image (docs/DEPLOY.md). Build it with `make image`: the
# wheels are made first, into build/image/wheels, so that no stage needs the network (the build
# runs with --network none). BASE is any image with python3 (3.11 or newer, the wheels' version)
# and useradd: the official slim Python by default, a local Debian base in the tests. Size:
# 212 MB on that Debian 12 base, of which 88 MB is strictcall's virtualenv (bench/RESULTS.md).
ARG BASE=python:3.11-slim

FROM ${BASE} AS install
ARG VERSION=
# the extras `make image` made wheels of (IMAGE_EXTRAS): what the documented features need
ARG EXTRAS=server,postgres,metrics,quotas,oauth
# make image removes this stage's image after the build (by this label): only the last is kept
LABEL strictcall.stage=install
COPY build/image/wheels/ /wheels/
# One virtualenv, from the wheels alone; pip and setuptools leave it (nothing installs at run).
RUN python3 -m venv /opt/strictcall \
    && /opt/strictcall/bin/python -m pip install --quiet --no-index --find-links /wheels \
        --disable-pip-version-check "strictcall[${EXTRAS}]${VERSION:+==$VERSION}" \
    && /opt/strictcall/bin/python -m pip uninstall --quiet --yes pip setuptools

FROM ${BASE}
ARG VERSION=
ARG REVISION=
ARG SOURCE=
LABEL org.opencontainers.image.title="strictcall" \
      org.opencontainers.image.description="strictcall serve, proxy and federate: tool calls checked in stages, over JSON-RPC (/rpc) and MCP (/mcp) on HTTP" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="MIT"
# A user of its own, by number (Kubernetes' runAsNonRoot checks the number); its home is the
# data volume. /etc/strictcall is for files the operator mounts (the proxy's --allow list).
RUN groupadd --system --gid 10001 strictcall \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/strictcall \
        --no-create-home --shell /usr/sbin/nologin strictcall \
    && mkdir -p /var/lib/strictcall /etc/strictcall \
    && chown 10001:10001 /var/lib/strictcall
COPY --from=install /opt/strictcall /opt/strictcall
# Configuration comes from the environment: STRICTCALL_DB names the store (a SQLite file in the
# volume by default; a postgresql:// URL from a secret in production). No secret is baked in.
ENV PATH=/opt/strictcall/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STRICTCALL_DB=/var/lib/strictcall/strictcall.sqlite3 \
    STRICTCALL_HEALTH_URL=http://127.0.0.1:8765/healthz
WORKDIR /var/lib/strictcall
VOLUME ["/var/lib/strictcall"]
USER 10001:10001
EXPOSE 8765
# SIGTERM: stop accepting, finish the requests in flight (10 s at most), write the last audit
# batch, close the store; give the engine 15 s (docker stop --time 15) before it kills.
STOPSIGNAL SIGTERM
# /healthz: 200 while the store answers, 503 while it does not (urlopen raises on 503). The
# slim images have no curl: Python asks. STRICTCALL_HEALTH_URL follows a --port of your own.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/opt/strictcall/bin/python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['STRICTCALL_HEALTH_URL'], timeout=2)"]
ENTRYPOINT ["strictcall"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8765"]
