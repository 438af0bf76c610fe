#!/usr/bin/env bash
# The stand-in for python:3.11-slim-bookworm where no image registry answers: a Debian
# bookworm root file system made here from Debian's packages (mmdebstrap), with CPython 3.11
# in a virtual environment on PATH (so `python` and `pip` are what the official image has),
# the machine's CA certificates (its package proxy may re-sign TLS) and `docker import`.
# Usage: base-image.sh TAG [CACHE_DIR]. Kept as a tar under CACHE_DIR for the next run.
set -euo pipefail
tag=$1
cache=${2:-/var/cache/crawlstream}
here=$(cd "$(dirname "$0")" && pwd)
# The cache key: the lines between the recipe markers (what goes into the root file system).
recipe=$(sed -n '/^# recipe:begin/,/^# recipe:end/p' "$here/base-image.sh" | sha256sum | cut -c1-12)
rootfs="$cache/base-bookworm-$recipe.tar"
mkdir -p "$cache"
if [[ ! -s $rootfs ]]; then
    staging=$(mktemp "$cache/base-XXXXXX.tar")
    trap 'rm -f "$staging"' EXIT
# recipe:begin
    # The same trimming as Debian's slim images: no man pages, docs or translations, and
    # their apt configuration that deletes downloaded packages after each install.
    mmdebstrap --quiet --variant=minbase --mode=root --format=tar \
        --include=ca-certificates,python3,python3-venv \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --customize-hook='printf "%s\n" "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };" "APT::Update::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };" "Dir::Cache::pkgcache \"\";" "Dir::Cache::srcpkgcache \"\";" > "$1/etc/apt/apt.conf.d/docker-clean"' \
        --customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true' \
        --customize-hook='chroot "$1" update-ca-certificates' \
        --customize-hook='chroot "$1" python3 -m venv /opt/python' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/root/.cache' \
        bookworm "$staging" http://deb.debian.org/debian
# recipe:end
    mv "$staging" "$rootfs"
    trap - EXIT
fi
if [[ $(docker image inspect --format '{{index .Config.Labels "dev.crawlstream.recipe"}}' "$tag" 2>/dev/null) == "$recipe" ]]; then
    exit 0  # imported from this recipe's root file system already
fi
# recipe:begin (the image's configuration)
docker import \
    --change "LABEL dev.crawlstream.recipe=$recipe" \
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$rootfs" "$tag" >/dev/null
# recipe:end
