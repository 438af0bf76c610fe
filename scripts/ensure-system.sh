#!/usr/bin/env bash
# Installs the system pieces the project needs when they are missing: Chromium's headless shell
# from Debian, and kcat (docs/contracts.md's example of a client in another language; its tests
# skip without it).
# Java 17 and Maven are expected on the machine (the broker's jars are resolved on first use).
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif have sudo; then sudo "$@"; else
    echo "need root to run: $*" >&2; return 1; fi
}

apt_updated=no
apt_install() {
  if [ "$apt_updated" = no ]; then as_root apt-get update -qq; apt_updated=yes; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The headless shell: what the worker launches when it finds it (service/browser/launch.py).
if ! have chromium-headless-shell; then
  if have apt-get; then
    echo "Installing Chromium's headless shell from Debian's packages..."
    apt_install chromium-headless-shell
  elif ! have chromium && ! have chromium-browser && ! have google-chrome; then
    echo "No Chromium found and no apt-get: run '.venv/bin/playwright install chromium'" >&2
  fi
fi
if ! have kcat && have apt-get; then
  echo "Installing kcat from Debian's packages..."
  apt_install kcat || echo "kcat could not be installed: the tests that run it will skip" >&2
fi
for tool in java mvn; do
  have "$tool" || { echo "missing: $tool (Java 17 and Maven run the local Kafka broker)" >&2; exit 1; }
done
# The Firecrawl JavaScript SDK and firecrawl-mcp for the tests that run them, from their lock
# (again when the lock is newer than what node_modules holds).
if have npm && [ tests/js/package-lock.json -nt tests/js/node_modules/.package-lock.json ]; then
  echo "Installing the Firecrawl JavaScript SDK (tests/js) with npm ci..."
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error \
    || echo "npm ci failed: the JavaScript SDK test will skip" >&2
fi
