# Crawlstream worker: Chromium's headless shell from Debian, the locked Python packages,
# non-root, tini as PID 1.
# The official base by default; BASE_IMAGE lets a machine without a registry build on a
# stand-in with the same layout (scripts/container/base-image.sh, docs/containers.md).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The project's runtime dependencies, read from pyproject.toml: the layers below are rebuilt
# when they change, not when the tools' configuration in pyproject.toml does.
FROM ${BASE_IMAGE} AS dependencies
COPY pyproject.toml /
RUN python -c "import tomllib; print(*tomllib.load(open('/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" > /runtime.txt

FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CRAWL_BROWSER_EXECUTABLE=/usr/bin/chromium-headless-shell \
    CRAWL_LOG_FORMAT=json

# libatomic1: Playwright's bundled Node (the browser's driver) links it; slim bases lack it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium-headless-shell tini fonts-liberation libatomic1 \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# The runtime dependencies at the lock's versions; the lock's development tools (pytest,
# ruff, mypy, the manifest validators) stay out of the image.
COPY requirements.lock ./
COPY --from=dependencies /runtime.txt ./
RUN pip install -c requirements.lock -r runtime.txt
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-deps . \
 && groupadd --gid 10001 crawl \
 && useradd --create-home --uid 10001 --gid 10001 crawl

# Numeric, so Kubernetes' runAsNonRoot can check it (deploy/kubernetes runs as 10001:10001).
USER 10001:10001
EXPOSE 9400
# The liveness probe of deploy/kubernetes: /healthz on the metrics port (CRAWL_METRICS_PORT,
# so a container given another port, or one of several on the host's network, is probed).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s CMD python -c "import os,sys,urllib.request; port = os.environ.get('CRAWL_METRICS_PORT', '9400'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"
# tini reaps every Chromium child; the worker handles SIGTERM (drain, commit, exit 0).
ENTRYPOINT ["/usr/bin/tini", "--", "crawlstream"]
CMD ["worker"]
