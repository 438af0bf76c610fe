"""Run the broker as a child Java process: format storage once, start, wait until it serves."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final, Self

from aiokafka.admin import AIOKafkaAdminClient

from service.broker.jars import ensure_kafka_jars
from service.errors import BrokerUnavailableError, ConfigurationError
from service.logs import get_logger

if TYPE_CHECKING:
    from types import TracebackType

log = get_logger(__name__)

READY_DEADLINE_S: Final = 90.0
"""How long a starting broker may take to serve its first metadata request."""

STOP_DEADLINE_S: Final = 30.0
"""How long a stopping broker may take before it is killed."""

JAVA_HEAP: Final = ("-Xms256m", "-Xmx768m")
"""Enough for a development broker; keeps the machine's memory for browsers."""

_PROPERTIES: Final = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={data_dir}/log
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.segment.bytes=67108864
"""

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
    """

    def __init__(self, *, port: int = 0, data_dir: Path | None = None) -> None:
        self.port = port or free_port()
        self._given_dir = data_dir
        self._data_dir: Path | None = None
        self._process: asyncio.subprocess.Process | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

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
            )
        log_config = f"-Dlog4j.configuration=file:{data_dir / 'log4j.properties'}"
        with (data_dir / "stderr.log").open("ab") as stderr:
            self._process = await asyncio.create_subprocess_exec(
                java,
                *JAVA_HEAP,
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
        controller_port = _controller_port_for(data_dir)
        config = data_dir / "server.properties"
        config.write_text(
            _PROPERTIES.format(port=self.port, controller_port=controller_port, data_dir=data_dir)
        )
        (data_dir / "log4j.properties").write_text(_LOG4J.format(data_dir=data_dir))
        return config

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_DEADLINE_S
        while loop.time() < deadline:
            if self._process is None or self._process.returncode is not None:
                raise BrokerUnavailableError(f"the broker exited; see {self._data_dir}")
            if await _answers(self.bootstrap_servers):
                return
            await asyncio.sleep(0.5)
        raise BrokerUnavailableError(f"the broker did not start within {READY_DEADLINE_S} s")


def _controller_port_for(data_dir: Path) -> int:
    """The controller port is part of the formatted quorum, so it is kept with the data."""
    remembered = data_dir / "controller.port"
    if remembered.exists():
        return int(remembered.read_text())
    port = free_port()
    remembered.write_text(str(port))
    return port


async def _answers(bootstrap_servers: str) -> bool:
    host, _, port = bootstrap_servers.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
    except (TimeoutError, OSError):
        return False
    writer.close()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=3000)
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
