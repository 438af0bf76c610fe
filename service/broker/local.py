"""Run the broker as a child Java process: format storage once, start, wait until it serves."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import socket
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self

from aiokafka.admin import AIOKafkaAdminClient

from service.broker.jars import ensure_kafka_jars
from service.errors import BrokerUnavailableError, ConfigurationError
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import TracebackType

log = get_logger(__name__)

READY_DEADLINE_S: Final = 90.0
"""How long a starting broker may take to serve its first metadata request."""

STOP_DEADLINE_S: Final = 30.0
"""How long a stopping broker may take before it is killed."""

JAVA_HEAP: Final = ("-Xms256m", "-Xmx768m")
"""Enough for a development broker; keeps the machine's memory for browsers."""

JAVA_CPU: Final = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""A development broker shares two cores with browsers: the client compiler only and the
serial collector. Measured here (start, 10 topic sets and 2,000 acknowledged sends, 30 s
idle): CPU 5.1 -> 3.5 s to ready, 7.3 -> 4.3 s for the load (wall 5.4 -> 4.6 s), 2.1 ->
1.1 s idle. Also for the storage tool, which runs once a start."""

SCRAM_MECHANISM: Final = "SCRAM-SHA-256"
"""The SASL mechanism of the client listener when the broker is given SCRAM users."""

BROKER_USER: Final = "crawlstream-broker"
"""The broker's own SCRAM user: inter-broker traffic shares the authenticated listener."""

_SCRAM_UNSAFE: Final = frozenset('"\\,=[]\n\r\t ')
"""Characters that would break StorageTool's `[name=...,password=...]` or the JAAS line."""

_PROPERTIES: Final = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners={listener}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners={listener}://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map={listener}:{listener},CONTROLLER:PLAINTEXT
inter.broker.listener.name={listener}
log.dirs={data_dir}/log
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# a single node's controller has no follower to keep fresh: a no-op metadata record every
# 5 s, not Kafka's default 500 ms, which costs an idle broker CPU (docs/development.md)
metadata.max.idle.interval.ms=5000
auto.create.topics.enable=false
log.segment.bytes=67108864
"""

_SASL_PROPERTIES: Final = (
    "sasl.enabled.mechanisms={mechanism}\n"
    "sasl.mechanism.inter.broker.protocol={mechanism}\n"
    "listener.name.sasl_plaintext.{mechanism_lower}.sasl.jaas.config="
    "org.apache.kafka.common.security.scram.ScramLoginModule required"
    ' username="{user}" password="{password}";\n'
)
"""The client listener's SASL set-up; the JAAS login is the broker's own (inter-broker) user."""

_LOG4J: Final = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={data_dir}/broker.log
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=1
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalBroker:
    """A single-node Kafka in KRaft mode, as an async context manager.

    `async with LocalBroker(port=9092) as broker: broker.bootstrap_servers` starts the broker
    and stops it on exit. A `data_dir` that already holds a formatted log is reused.

    With `scram_users` (name -> password) the client listener is SASL_PLAINTEXT with
    SCRAM-SHA-256 and only those users get in. Users are created when the storage is
    formatted, so a reused `data_dir` keeps the users it was formatted with.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        data_dir: Path | None = None,
        scram_users: Mapping[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self._given_dir = data_dir
        self._data_dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._scram_users = dict(scram_users or {})
        _check_scram_users(self._scram_users)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def security_protocol(self) -> str:
        """What clients must speak to the listener at `bootstrap_servers`."""
        return "SASL_PLAINTEXT" if self._scram_users else "PLAINTEXT"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise BrokerUnavailableError("the broker is not running")
        return self._process.pid

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            raise ConfigurationError("Java 17 (`java`) is needed to run the local broker")
        jars = await asyncio.to_thread(ensure_kafka_jars)
        data_dir = self._prepare_dir()
        config = self._write_config(data_dir)
        classpath = f"{jars}/*"
        if not (data_dir / "log" / "meta.properties").exists():
            await _run_java(
                java,
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                uuid.uuid4().hex[:22],
                "-c",
                str(config),
                *self._scram_arguments(data_dir),
            )
        log_config = f"-Dlog4j.configuration=file:{data_dir / 'log4j.properties'}"
        with (data_dir / "stderr.log").open("ab") as stderr:
            self._process = await asyncio.create_subprocess_exec(
                java,
                *JAVA_HEAP,
                *JAVA_CPU,
                log_config,
                "-cp",
                classpath,
                "kafka.Kafka",
                str(config),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
            )
        log.info("broker.starting", port=self.port, data_dir=str(data_dir), pid=self.pid)
        await self._wait_ready()
        log.info("broker.ready", bootstrap_servers=self.bootstrap_servers)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_DEADLINE_S)
            except TimeoutError:
                process.kill()
                await process.wait()
            log.info("broker.stopped", port=self.port, returncode=process.returncode)
        if self._given_dir is None and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)

    async def kill(self) -> None:
        """Stop abruptly (SIGKILL), keeping the data: for fault tests."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def restart(self) -> None:
        """Start again on the same port and data after `stop()` or `kill()`."""
        given, self._given_dir = self._given_dir, self._data_dir
        try:
            await self.start()
        finally:
            self._given_dir = given

    def _prepare_dir(self) -> Path:
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self._data_dir = self._given_dir
        elif self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="crawlstream-kafka-"))
        return self._data_dir

    def _write_config(self, data_dir: Path) -> Path:
        controller_port = int(_remembered(data_dir, "controller.port", lambda: str(free_port())))
        properties = _PROPERTIES.format(
            listener=self.security_protocol,
            port=self.port,
            controller_port=controller_port,
            data_dir=data_dir,
        )
        if self._scram_users:
            properties += _SASL_PROPERTIES.format(
                mechanism=SCRAM_MECHANISM,
                mechanism_lower=SCRAM_MECHANISM.lower(),
                user=BROKER_USER,
                password=_broker_password(data_dir),
            )
        config = data_dir / "server.properties"
        config.write_text(properties)
        config.chmod(0o600)
        (data_dir / "log4j.properties").write_text(_LOG4J.format(data_dir=data_dir))
        return config

    def _scram_arguments(self, data_dir: Path) -> list[str]:
        """StorageTool options that create the SCRAM users, the broker's own first."""
        if not self._scram_users:
            return []
        users = {BROKER_USER: _broker_password(data_dir)} | self._scram_users
        arguments = []
        for name, password in users.items():
            arguments += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
        return arguments

    def _probe_options(self) -> dict[str, Any]:
        """aiokafka options for the readiness probe: it logs in as the first given user."""
        options: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        if self._scram_users:
            name, password = next(iter(self._scram_users.items()))
            options |= {
                "security_protocol": self.security_protocol,
                "sasl_mechanism": SCRAM_MECHANISM,
                "sasl_plain_username": name,
                "sasl_plain_password": password,
            }
        return options

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_DEADLINE_S
        while loop.time() < deadline:
            if self._process is None or self._process.returncode is not None:
                raise BrokerUnavailableError(f"the broker exited; see {self._data_dir}")
            if await _answers(self._probe_options()):
                return
            await asyncio.sleep(0.5)
        raise BrokerUnavailableError(f"the broker did not start within {READY_DEADLINE_S} s")


def _check_scram_users(users: Mapping[str, str]) -> None:
    if BROKER_USER in users:
        raise ConfigurationError(f"the SCRAM user name {BROKER_USER!r} is the broker's own")
    for name, password in users.items():
        if not name or not password or _SCRAM_UNSAFE & set(name + password):
            raise ConfigurationError(
                f"SCRAM user {name!r}: name and password must be non-empty and free of"
                " quotes, backslashes, commas, '=', brackets and white space"
            )


def _remembered(data_dir: Path, name: str, make: Callable[[], str]) -> str:
    """A value that is part of the formatted storage (quorum port, broker password), kept
    with the data so a restart on the same data finds it again."""
    path = data_dir / name
    if path.exists():
        return path.read_text()
    value = make()
    path.write_text(value)
    path.chmod(0o600)
    return value


def _broker_password(data_dir: Path) -> str:
    return _remembered(data_dir, "broker.secret", lambda: secrets.token_urlsafe(24))


async def _answers(options: dict[str, Any]) -> bool:
    host, _, port = str(options["bootstrap_servers"]).rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
    except (TimeoutError, OSError):
        return False
    writer.close()
    admin = AIOKafkaAdminClient(**options, request_timeout_ms=3000)
    try:
        await asyncio.wait_for(admin.start(), 5)
        await asyncio.wait_for(admin.list_topics(), 5)
    except (TimeoutError, OSError, Exception):  # noqa: BLE001 - any failure means "not yet"
        return False
    else:
        return True
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(admin.close(), 5)


async def _run_java(java: str, classpath: str, main: str, *args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        java,
        *JAVA_CPU,
        "-cp",
        classpath,
        main,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), READY_DEADLINE_S)
    if process.returncode != 0:
        raise BrokerUnavailableError(f"{main} failed: {output.decode(errors='replace')[-500:]}")
