# Crawlstream worker: Debian's Chromium, the locked Python packages, non-root, tini as PID 1.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CRAWL_BROWSER_EXECUTABLE=/usr/bin/chromium \
    CRAWL_LOG_FORMAT=json

RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium tini fonts-liberation \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.lock ./
RUN pip install --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-deps . \
 && groupadd --gid 10001 crawl \
 && useradd --create-home --uid 10001 --gid 10001 crawl

# Numeric, so Kubernetes' runAsNonRoot can check it (deploy/kubernetes runs as 10001:10001).
USER 10001:10001
EXPOSE 9400
# The liveness probe of deploy/kubernetes: /healthz on the metrics port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9400/healthz', timeout=4).status == 200 else 1)"
# tini reaps every Chromium child; the worker handles SIGTERM (drain, commit, exit 0).
ENTRYPOINT ["/usr/bin/tini", "--", "crawlstream"]
CMD ["worker"]
