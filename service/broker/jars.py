"""Resolve the official Apache Kafka jars from Maven Central with the machine's Maven, once."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Final

from service.errors import ConfigurationError

KAFKA_VERSION: Final = "4.1.1"
"""The broker version; keep equal to `kafka.version` in pom.xml."""

DEFAULT_CACHE: Final = Path.home() / ".cache" / "crawlstream"
"""Where resolved jars are kept between runs."""

MAVEN_DEADLINE_S: Final = 900
"""Upper bound on the first resolution (downloads about 40 MB)."""

_COMPLETE: Final = ".complete"


def ensure_kafka_jars(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """The folder holding the broker's jars, resolving them first when not cached."""
    target = cache_dir / f"kafka-{KAFKA_VERSION}"
    if (target / _COMPLETE).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigurationError("Maven (`mvn`) is needed to fetch the Kafka jars; install it")
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="kafka-jars-", dir=cache_dir))
    pom = resources.files("service.broker").joinpath("pom.xml")
    with resources.as_file(pom) as pom_path:
        command = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom_path),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        done = subprocess.run(  # noqa: S603 - fixed arguments, Maven from PATH
            command, capture_output=True, text=True, timeout=MAVEN_DEADLINE_S, check=False
        )
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise ConfigurationError("Maven could not resolve the Kafka jars: " + " | ".join(tail))
    (staging / _COMPLETE).touch()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
