"""One settings tree, read from the environment (prefix `CRAWL_`) and nowhere else.

Every field's docstring is its documentation: `crawlstream settings --out docs/settings.md`
makes the settings page from them.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BeforeValidator,
    ByteSize,
    Field,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.errors import ConfigurationError
from service.proxy_url import UpstreamProxy

ENV_PREFIX = "CRAWL_"

DEFAULT_DEPLOYMENT = "crawlstream"
"""The default `CRAWL_GROUP_ID`: its internal topics keep the names without a group."""


def _seconds(value: object) -> object:
    """Durations in the environment are plain seconds (`20`, `0.25`) or ISO 8601 (`PT20S`)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


Seconds = Annotated[timedelta, BeforeValidator(_seconds)]
"""A duration: seconds as a number, or ISO 8601."""


def _default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    """Everything a worker, the client and the CLI can be told."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        use_attribute_docstrings=True,
        extra="ignore",
        frozen=True,
    )

    # --- Kafka ---------------------------------------------------------------------------
    kafka_bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        validation_alias=AliasChoices("CRAWL_KAFKA_BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS"),
    )
    """Kafka cluster to use (`host:port[,host:port]`); also read unprefixed as
    `KAFKA_BOOTSTRAP_SERVERS`."""
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """How clients talk to the brokers."""
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    """SASL mechanism, with a SASL_* protocol."""
    kafka_sasl_username: str | None = None
    """SASL user name."""
    kafka_sasl_password: SecretStr | None = None
    """SASL password."""
    kafka_ssl_cafile: Path | None = None
    """CA bundle that signs the brokers' certificates (SSL, SASL_SSL)."""
    kafka_ssl_certfile: Path | None = None
    """Client certificate for mutual TLS."""
    kafka_ssl_keyfile: Path | None = None
    """Private key of the client certificate."""
    requests_topic: str = "crawl.requests"
    """Topic the crawl requests arrive on."""
    results_topic: str = "crawl.results"
    """Topic one `PageResult` per page goes to."""
    progress_topic: str = "crawl.progress"
    """Topic the `ProgressEvent`s go to."""
    dead_letter_topic: str = "crawl.dead-letter"
    """Topic that receives requests that cannot be parsed, with headers saying why."""
    control_topic: str = "crawl.control"
    """Compacted topic of `ControlMessage`s (cancels), keyed by request_id; every worker reads
    all of it."""
    frontier_topic: str = "crawl.frontier"
    """Topic of deep crawls' frontier records (sitemaps read, links found per page), keyed by
    request_id: the log a job's next owner rebuilds its state from after a failover. Default:
    `crawl.frontier`, or `crawl.<CRAWL_GROUP_ID>.frontier` for another deployment."""
    frontier_retention: Seconds = Field(default=timedelta(days=7), gt=timedelta(0))
    """How long frontier records are kept (`retention.ms` of the frontier topic when the
    worker creates it); a deep crawl that is redelivered later than this starts over."""
    cancel_retention: Seconds = Field(default=timedelta(days=7), gt=timedelta(0))
    """How long a cancel is remembered: a request_id cancelled longer ago runs again (after
    that the compacted record may be deleted with a tombstone)."""
    group_id: str = Field(default=DEFAULT_DEPLOYMENT, pattern=r"^[A-Za-z0-9._-]{1,200}$")
    """Consumer group of the coordinators (the requests topic), shared by all replicas, and
    the deployment's name: the internal topics and the other groups follow from it unless
    set (`crawl.pages` for `crawlstream`, `crawl.<group>.pages` for another; see
    [tenancy](tenancy.md)), and a worker takes internal records of its own deployment only."""
    pages_topic: str = "crawl.pages"
    """Topic of page tasks, keyed by the page's host (`CRAWL_PAGE_KEY`): coordinators write
    them, fetchers render them. Default: `crawl.pages`, or `crawl.<CRAWL_GROUP_ID>.pages`."""
    fetcher_group_id: str = "crawlstream-fetchers"
    """Consumer group of the fetchers (the pages topic), shared by all replicas. Default:
    `<CRAWL_GROUP_ID>-fetchers`."""
    cluster_secret: SecretStr | None = None
    """Key of the HMAC-SHA256 tag on every internal record (pages, frontier, hosts, cache):
    a worker ignores (counts, logs once) a record whose tag does not match, so a producer
    that can write the internal topics cannot forge a task or an outcome. The same on every
    worker of a deployment. Unset: a key derived from the deployment's name (any writer can
    compute it), and the worker warns at start that internal records are not authenticated."""
    page_partitions: int = Field(default=12, ge=1)
    """Partitions of the pages topic when the worker creates it (the fetchers' ceiling)."""
    page_key: Literal["host", "domain"] = "host"
    """What a page task is keyed by, so one fetcher owns all of it and its per-host limit,
    pacing, robots.txt and backoff hold across the group: the URL's host, or its registered
    domain (`a.example.com` and `b.example.com` together)."""
    host_shards: dict[str, PositiveInt] = Field(default_factory=dict)
    """Hosts (or domains, by `CRAWL_PAGE_KEY`) spread on purpose over several fetchers, as a
    JSON object from host to shard count (e.g. `{"docs.example.com": 4}`): a page goes to
    one shard by its URL, and each shard applies the per-host limit alone. Default: 1."""
    host_placement: Literal["directory", "hash"] = "directory"
    """How a page key gets its page partition: `directory`, the least-loaded partition when a
    coordinator first meets it, recorded in `CRAWL_HOSTS_TOPIC` (the first record wins, so
    every coordinator agrees), which spreads hosts evenly over the fetchers; or `hash`, the
    key's murmur2 hash (no directory; a few hosts hash unevenly: 25 hosts went 5, 4, 4, 2, 2,
    2, 2, 1, 1, 1, 1, 0 over 12 partitions). Every coordinator must use the same."""
    cache_index_topic: str = "crawl.cache.index"
    """Compacted topic of the page cache's index records, keyed by cache key, with the
    partitions of the pages topic: an entry sits on the partition its host is placed on.
    Default: `crawl.cache.index`, or `crawl.<CRAWL_GROUP_ID>.cache.index`."""
    cache_bodies_topic: str = "crawl.cache.bodies"
    """Compacted topic of the page cache's stored documents, co-partitioned with the index.
    Default: `crawl.cache.bodies`, or `crawl.<CRAWL_GROUP_ID>.cache.bodies`."""
    cache_retention: Seconds = Field(default=timedelta(days=7), gt=timedelta(0))
    """How long a cache entry is kept after it was written (`retention.ms` of the cache
    topics when the worker creates them): no request is answered from an older one."""
    cache_memory_bytes: ByteSize = Field(default=ByteSize(64 * 2**20), ge=0)
    """Stored pages a fetcher keeps in memory after reading or writing them (least recently
    used out first), so a page asked for again is answered without reading Kafka."""
    changes_topic: str = "crawl.changes"
    """Topic of the change feed: one record per tracked page that is `new`, `changed` or
    `removed` (never `same`), keyed by the page's URL (see docs/changes.md)."""
    change_history_topic: str = "crawl.changes.history"
    """Compacted topic of the change-tracking history (the previous observation of each
    tracked page variant per tag: its normalised content's hash and its Markdown), with the
    partitions of the pages topic: a history sits on the partition its host is placed on."""
    change_crawls_topic: str = "crawl.changes.crawls"
    """Compacted topic of what each tracked deep crawl reached (per seeds, tag and crawl
    spec): the next such crawl reports the pages it no longer reaches as `removed`. Kept
    `CRAWL_CHANGE_HISTORY_RETENTION`."""
    change_history_retention: Seconds = Field(default=timedelta(days=90), gt=timedelta(0))
    """How long a tracked page's last observation is kept (`retention.ms` of the history
    topic when the worker creates it), apart from the page cache's `CRAWL_CACHE_RETENTION`: a
    page tracked again after longer is `new`."""
    monitors_topic: str = "crawl.monitors"
    """Compacted topic of monitors (a schedule and its targets), keyed by monitor id, with the
    partitions of the requests topic: the coordinator owning requests partition p fires the
    monitors of partition p (see docs/monitors.md)."""
    monitor_ticks_topic: str = "crawl.monitor.ticks"
    """Compacted topic of each monitor's last fired tick, co-partitioned with the monitors
    topic: the next owner of a monitor knows what was fired. Default: `crawl.monitor.ticks`,
    or `crawl.<CRAWL_GROUP_ID>.monitor.ticks`."""
    monitor_min_interval: Seconds = Field(default=timedelta(seconds=60), gt=timedelta(0))
    """The shortest time between two ticks of a monitor's schedule: a schedule that ticks
    more often is refused (`every N seconds` schedules exist only below 60 s)."""
    cache_scope: Literal["shared", "tenant"] = "shared"
    """`shared`: one entry per page variant answers every request eligible for it; `tenant`:
    entries are kept apart per gateway tenant (and per Kafka producer's request metadata
    `tenant`), for operators who want no sharing at all."""
    hosts_topic: str = "crawl.hosts"
    """Compacted topic of the host directory (`CRAWL_HOST_PLACEMENT=directory`), one
    partition, keyed by page key: the page partition each key was placed on. Every
    coordinator reads all of it. Default: `crawl.hosts`, or `crawl.<CRAWL_GROUP_ID>.hosts`."""
    dispatch_window: int = Field(default=16, ge=1)
    """Pages of one run and one host dispatched to the fetchers and unfinished at once; the
    run's other pages of that host wait at its coordinator, so no page partition holds a
    long backlog of one run and a small request waits behind at most this many pages of a
    large one. A run's pages beyond it queue behind other runs' on the host's partition, and
    its browser context there may be handed back meanwhile: 16 keeps requests of up to 16
    pages per host in one piece."""
    local_pages: bool = True
    """In role `all`: a page task whose partition this worker's own fetcher owns is handed
    to it directly instead of through the pages topic (a produce, a fetch and a commit less
    a page). Such a page has no page record while it renders: were it to kill the worker,
    that death is not counted against it; its request is delivered again and sends its
    pages through the topic, so a page that kills every worker gets its `poison` result
    after `CRAWL_MAX_DELIVERIES` deaths there, one more in all. `false`: every page takes
    the topic."""
    role: Literal["all", "coordinator", "fetcher"] = "all"
    """What this worker does: `coordinator` (requests: plans, progress events, dispatch),
    `fetcher` (pages: render, results), or `all` (both, the default); also
    `crawlstream worker --role`."""
    static_membership: bool = False
    """Join the group as a static member named `CRAWL_WORKER_NAME` (`group.instance.id`): a
    replica restarted under the same name within the session timeout gets its partitions back
    without a rebalance. Use with stable names (a StatefulSet); a stopped static member's
    partitions wait for the session timeout (30 s) before they move."""
    requests_partitions: int = Field(default=12, ge=1)
    """Partitions of the requests topic when the worker creates it (the replica ceiling)."""
    output_partitions: int = Field(default=12, ge=1)
    """Partitions of the results, progress and dead-letter topics when created."""
    replication_factor: int = Field(default=1, ge=1)
    """Replication factor of topics the worker creates."""
    kafka_timeout: Seconds = timedelta(seconds=30)
    """Deadline for a broker operation (connect, send, commit)."""
    max_message_bytes: ByteSize = ByteSize(1_000_000)
    """Largest message the producer sends; larger results go as chunks."""
    max_request_bytes: ByteSize = ByteSize(1_000_000)
    """Largest request accepted; larger ones go to the dead letters."""
    max_metadata_bytes: ByteSize = ByteSize(65_536)
    """Largest request `metadata` (as echoed, compact JSON) accepted; larger: `invalid_request`."""
    max_deliveries: int = Field(default=3, ge=1)
    """Deliveries of one request record whose worker died under it; the next one quarantines
    the record as `poison` instead of running it again."""

    # --- Work ----------------------------------------------------------------------------
    worker_name: str = Field(default_factory=_default_worker_name)
    """Name of this replica on results, events and logs (default: host name and pid)."""
    max_urls_per_request: int = Field(default=100, ge=1)
    """Requests with more URLs are rejected."""
    max_crawl_pages: int = Field(default=10_000, ge=1)
    """Ceiling of a deep crawl's `crawl.max_pages`; larger requests are rejected."""
    max_page_slots: int = Field(default=8, ge=1)
    """Ceiling of pages rendered at once by one worker."""
    min_page_slots: int = Field(default=1, ge=1)
    """Floor of pages rendered at once: a worker always makes progress."""
    max_pages_per_request: int = Field(default=2, ge=1)
    """A request's share of the page slots: it renders more pages at once only in slots no
    other request's page waits for, and a request taken later starts before its pages beyond
    the share."""
    max_queued_pages: int = Field(default=40, ge=1)
    """Waiting pages a request taken now would wait behind (not those of a request already
    rendering beyond its share) at which the consumer pauses, when no page can start either."""
    max_paced_pages: int = Field(default=1000, ge=0)
    """Page records a fetcher holds, beside its backlog, while they wait for their host's
    pace (`crawl.delay_ms`) or backoff (`Retry-After`): they are no work a slot could start,
    so the partition is read past them (another tenant's pages behind a paced crawl go on)
    and they are not counted against the records in flight or the partition's run-ahead.
    They stay uncommitted (a fetcher killed meanwhile leaves them to the next owner). Beyond
    this many, paced records count as any other and the usual bounds hold the partition."""
    max_requests_in_flight: int = Field(default=64, ge=1)
    """Requests taken from Kafka and not yet committed, over all partitions."""
    max_partition_run_ahead: int = Field(default=32, ge=1, le=4096)
    """How far past its oldest unfinished request one partition of the requests topic may be
    read (a pages partition may be read as far as the fetcher's page backlog allows)."""
    max_page_timeout: Seconds = timedelta(seconds=60)
    """Upper bound on a request's `timeout_ms`."""
    max_request_deadline: Seconds = Field(default=timedelta(hours=1), gt=timedelta(0))
    """Upper bound on a request's `deadline_ms`."""
    max_result_bytes: ByteSize = ByteSize(20_000_000)
    """Hard cap on one page's result as a whole: `html`, `markdown` and `text` are cut to share
    what the other fields leave (`truncated` is set); a result whose other fields alone
    (`json`, `actions`, screenshots, links, structured data) are larger ends `too_large`."""
    content_processes: int = Field(default=2, ge=1, le=64)
    """Child processes that extract pages' content (parsing, selectors, Markdown, `extract`,
    structured data, PDF text): at most this many pages are extracted at once, each in a
    process the worker can kill, so no page's content holds the worker's event loop."""
    content_budget: Seconds = Field(default=timedelta(seconds=20), gt=timedelta(0))
    """Longest a page's content extraction may take; past it the content process is killed
    and replaced and the page ends `too_large`."""
    max_pdf_pages: int = Field(default=100, ge=1)
    """Pages of a PDF whose text is read; beyond them the text stops and `truncated` is set
    (`document.page_count` is still the document's own)."""
    shutdown_grace: Seconds = timedelta(seconds=20)
    """On SIGTERM, how long in-flight pages may take to finish before they are handed back."""
    max_pages_per_host: int = Field(default=4, ge=1)
    """Pages of one host rendered at once by one worker, over all its requests (a page
    waiting for its host holds no page slot)."""
    page_retries: int = Field(default=2, ge=0, le=10)
    """Extra tries of a page that failed transiently (HTTP 429 or 503; connection reset,
    refused or empty response), within the page's deadline."""
    retry_backoff_base: Seconds = Field(default=timedelta(seconds=0.5), gt=timedelta(0))
    """Bound of the first retry's random wait (full jitter); it doubles with each retry."""
    retry_backoff_max: Seconds = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """Longest wait before a retry, a server's `Retry-After` included."""

    render_learn_after: int = Field(default=3, ge=0)
    """Pages in a row of one host that `render: auto` had to send to the browser, after which
    the host's pages go straight to it (for 10 minutes or 100 pages; 0: never learn)."""

    render_settle: Seconds = Field(default=timedelta(seconds=3), ge=timedelta(0))
    """Longest wait, after a page's `wait_until` state, for its scripts to stop changing it
    (no timer due within 3 s or request pending, the DOM quiet for 250 ms; a page whose
    scripts did nothing after DOMContentLoaded does not wait). 0: read at `wait_until`."""

    render_shell_wait: Seconds = Field(default=timedelta(seconds=10), ge=timedelta(0))
    """Longest wait for a rendered page that is still an app shell (an empty mount point or
    main landmark, little text) to fill; after it the page is `not_rendered`. Bounded by the
    page's timeout; not applied with `wait_for`."""

    # --- Browser -------------------------------------------------------------------------
    browser_executable: Path | None = None
    """Chromium to launch; default: Playwright's own build when installed, else
    `chromium-headless-shell` on PATH, else `chromium`."""
    page_reuse_limit: int = Field(default=50, ge=1)
    """Navigations after which a pooled page is closed and replaced."""
    browser_recycle_pages: int = Field(default=2000, ge=1)
    """Pages after which the browser is drained and replaced by a fresh one."""
    spare_contexts: int = Field(default=1, ge=0)
    """Browser contexts opened ahead of need, each with its request share of pages, so a
    request does not wait for them; each is handed to one request only (0: off)."""
    session_idle: Seconds = timedelta(seconds=30)
    """How long a `session`'s shared browser context stays open after its last request ended,
    and how long a wiped context waits for its next request."""
    context_reuse: int = Field(default=20, ge=0)
    """Requests one browser context serves, one after another, before it is closed: between
    two of them it is wiped (pages at about:blank with their history and window name reset;
    cookies, permissions, HTTP cache and every origin's storage cleared), so its renderer
    processes are reused; one whose network stack keeps what no wipe clears (a login by URL
    credentials, client hints, HSTS) is closed instead (0: a new context for every request)."""

    proxies: dict[str, list[str]] = Field(default_factory=dict)
    """Upstream proxy pools a request may name in its `proxy` option: a JSON object from pool
    name to a list of `http://`, `https://` or `socks5://` URLs (credentials optional), e.g.
    `{"residential": ["http://user:pw@10.0.0.5:3128"]}`. A pool's proxies take turns, one per
    connection; they are the operator's, so their addresses are not checked by the URL policy
    (every target still is). Logs and messages name the pool, never a URL."""

    @field_validator("proxies")
    @classmethod
    def _proxy_urls(cls, pools: dict[str, list[str]]) -> dict[str, list[str]]:

        for name, urls in pools.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
                raise ValueError(f"proxy pool name {name!r}: 1-64 of [A-Za-z0-9._-]")
            for number, url in enumerate(urls, start=1):
                try:
                    UpstreamProxy.parse(url, pool=name)
                except ValueError as exc:
                    raise ValueError(f"proxy pool {name!r}, URL {number}: {exc}") from None
        return pools

    # --- URL policy ----------------------------------------------------------------------
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Comma-separated `host[:port]` entries exempt from the private-address block and the
    egress-port rule: `host:port` opens that port of that host, a bare `host` all its ports."""
    block_private_addresses: bool = True
    """Block targets that resolve to loopback, private, link-local or reserved addresses."""
    allow_insecure_tls: bool = False
    """Let a request fetch its pages without verifying their TLS certificates (the option
    `skip_tls_verification`, Firecrawl's `skipTlsVerification`): on a worker, a request
    asking for it is honoured on both paths (robots.txt, sitemaps and an upstream proxy's
    own certificate stay verified; its pages bypass the page cache); without it, the request
    is rejected `invalid_request`. On a gateway, `skipTlsVerification: true` is passed on only
    with it; otherwise the document's `warning` says certificates were verified. Set it on
    workers and gateways alike."""
    egress_ports: Annotated[list[Annotated[int, Field(ge=1, le=65535)]], NoDecode] = Field(
        default_factory=lambda: [80, 443]
    )
    """Comma-separated ports the crawler reaches on any host (page URLs and the egress proxy's
    CONNECT and plain requests alike); other ports only through `CRAWL_ALLOWED_HOSTS`."""
    egress_max_connections: int = Field(default=512, ge=1)
    """Connections the egress proxy holds at once. When it is full, a newcomer closes the
    least recently active connection of the browser context holding the most, if that one
    holds more than its fair share; otherwise the newcomer is closed at once. 512 is 8 request
    contexts at `CRAWL_EGRESS_CONNECTIONS_PER_CONTEXT`. A relayed connection takes 2 file
    descriptors: the worker warns at start when its limit is below 2 per connection plus 256."""

    egress_connections_per_context: int = Field(default=64, ge=1)
    """Connections one browser context may hold at the egress proxy at once (each context has
    a proxy credential of its own): its next one closes its least recently active one, so a
    page that opens hundreds of WebSockets or hanging fetches starves only itself. 64 is
    Chromium's own limits per context and proxy (32 connections, 32 WebSockets)."""

    # --- Memory --------------------------------------------------------------------------
    memory_limit: ByteSize | None = None
    """Memory budget of the worker's process tree (its PSS); it applies when it leaves less
    headroom than every cgroup limit, each judged against its own cgroup's usage (host memory
    when neither is set)."""

    memory_safety_margin: ByteSize = ByteSize(256 * 1024**2)
    """Headroom kept free beyond the expected cost of the next page."""
    memory_resume_ratio: float = Field(default=0.70, gt=0, lt=1)
    """Below this share of the limit, paused partitions may resume and concurrency may grow."""
    memory_pause_ratio: float = Field(default=0.85, gt=0, lt=1)
    """At this share of the limit, partitions pause and the page limit is cut."""
    memory_critical_ratio: float = Field(default=0.92, gt=0, lt=1)
    """At this share of the limit, no page starts and the newest pages are handed back."""
    initial_page_cost: ByteSize = ByteSize(150 * 1024**2)
    """Expected memory per page before any page has been measured."""
    browser_recycle_growth: ByteSize = ByteSize(512 * 1024**2)
    """Growth of the browser tree's PSS after which the browser is replaced."""
    memory_sample_interval: Seconds = timedelta(milliseconds=250)
    """Time between two memory samples."""
    memory_governor: bool = True
    """Admit pages by memory headroom; off: a fixed `CRAWL_MAX_PAGE_SLOTS` (benchmarks only)."""

    # --- Gateway (Firecrawl-compatible HTTP API) -----------------------------------------
    gateway_port: int = Field(default=3002, ge=0, le=65535)
    """Port `crawlstream gateway` serves Firecrawl's v2 API on (3002, Firecrawl's self-hosted
    one); `/metrics`, `/healthz` and `/readyz` are served there too."""
    gateway_host: str = "0.0.0.0"  # noqa: S104 - a server in a container listens on all
    """Address the gateway listens on."""
    gateway_keys_file: Path | None = None
    """JSON file of API keys and tenants (`{"keys": [{"key", "tenant", "max_concurrent_jobs",
    "pages_per_minute", "webhook_secret"}]}`, e.g. a mounted Kubernetes Secret); unset: the
    gateway is open. The webhook dispatcher reads it too, for each tenant's webhook secret."""
    gateway_scrape_timeout: Seconds = Field(default=timedelta(seconds=60), gt=timedelta(0))
    """How long a synchronous `POST /v2/scrape` without a `timeout` waits for its page (queueing
    in Kafka included) before it answers 408 and cancels the request."""
    gateway_secret: SecretStr | None = None
    """Key of the HMAC that signs the gateway's marker in each request's metadata (tenant, job
    kind): a record whose marker is not signed with it is no tenant's job. It signs monitor
    records and their checks' markers too: set the same value on the gateway, the workers
    (their coordinators fire a tenant's monitor only when its record is signed with it, and
    sign its checks) and the webhook dispatcher. Unset: a key derived from the keys file's
    bytes (so editing that file forgets running jobs: set this in production), or, without a
    keys file, from the requests topic's name."""
    gateway_max_body_bytes: ByteSize = Field(default=ByteSize(10 * 2**20), ge=1024)
    """Largest HTTP request body the gateway reads; a larger one is refused with 413 before it
    is read (by its `Content-Length`, or as soon as a chunked body passes it)."""
    gateway_metrics_key: SecretStr | None = None
    """Operator key of the gateway's `/metrics` (`Authorization: Bearer <key>`). With a keys
    file and no metrics key, `/metrics` answers 401 to everyone (its series name tenants);
    an open gateway serves it without a key."""
    gateway_metrics_port: int = Field(default=0, ge=0, le=65535)
    """A port of the gateway's own for `/metrics`, `/healthz` and `/readyz` without a key (for
    Prometheus inside the cluster; keep it off the Service); 0: none."""
    gateway_tenant_reads: int = Field(default=2, ge=1)
    """Result reads (status pages, errors, watcher catch-ups) one tenant may run at once on a
    replica; more wait their turn, so one tenant's polls never hold every reader."""

    # --- Webhooks (`crawlstream webhooks`) ---------------------------------------------
    webhook_secret: SecretStr | None = None
    """Key of the HMAC-SHA256 signature of webhook bodies (`X-Firecrawl-Signature:
    sha256=<hex>`, as Firecrawl signs) for a gateway without keys and for Kafka producers'
    requests; with a keys file each tenant's own `webhook_secret` signs its jobs' webhooks.
    Unset: those webhooks go unsigned."""
    webhook_seal_key: SecretStr | None = None
    """Key the gateway seals each job's webhook target (URL, headers, tenant) with and the
    dispatcher opens it with, so no credential of a webhook is echoed in events or results;
    the workers seal a Kafka producer's webhook that carries credentials with it. Set the same
    value on all three. Unset: derived from `CRAWL_WEBHOOK_SECRET`; without either, the gateway
    refuses webhooks with headers or a URL query (400) and a worker rejects such a request."""
    webhook_concurrency: int = Field(default=4, ge=1, le=64)
    """Deliveries at once to one receiver (one `scheme://host:port`); a job's events always
    go one after the other, in order. Receivers never wait for each other."""
    webhook_queue_depth: int = Field(default=1000, ge=1, le=100_000)
    """Events read but not yet delivered that one receiver may hold; when one is full, the
    dispatcher stops reading until it has room (the memory bound)."""
    webhook_group_id: str = "crawlstream-webhooks"
    """Consumer group of the webhook dispatchers (any number of replicas). Default:
    `<CRAWL_GROUP_ID>-webhooks`."""
    webhook_attempts: int = Field(default=6, ge=1, le=20)
    """Deliveries tried per webhook event (with backoff) before it is dropped and counted."""
    webhook_timeout: Seconds = Field(default=timedelta(seconds=10), gt=timedelta(0))
    """Deadline of one delivery (connect, send, answer)."""
    webhook_max_age: Seconds = Field(default=timedelta(days=1), gt=timedelta(0))
    """Events older than this when read are not delivered (logged `webhook.expired`): a new
    dispatcher group starts at the beginning of the progress topic, and must not replay its
    whole retention to the receivers."""

    # --- Observability -------------------------------------------------------------------
    metrics_port: int = Field(default=9400, ge=0, le=65535)
    """Port of `/metrics`, `/healthz` and `/readyz` (0: off)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest log level written."""
    log_format: Literal["auto", "json", "console"] = "auto"
    """`auto`: JSON unless standard error is a terminal."""

    @model_validator(mode="before")
    @classmethod
    def _deployment_names(cls, data: object) -> object:
        """Internal topics and groups not set follow from the deployment's name."""
        if not isinstance(data, dict):
            return data
        group = str(data.get("group_id") or DEFAULT_DEPLOYMENT)
        return deployment_names(group) | data

    @property
    def deployment(self) -> str:
        """The deployment's name (`CRAWL_GROUP_ID`): on every internal record it writes."""
        return self.group_id

    @property
    def group_instance_id(self) -> str | None:
        """The static member name, when static membership is on."""
        return self.worker_name if self.static_membership else None

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

    @field_validator("egress_ports", mode="before")
    @classmethod
    def _split_ports(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


def deployment_names(group: str) -> dict[str, str]:
    """The internal topics and groups of the deployment named `group`: today's names for
    the default deployment, names of its own for any other."""
    prefix = "crawl" if group == DEFAULT_DEPLOYMENT else f"crawl.{group}"
    return {
        "pages_topic": f"{prefix}.pages",
        "frontier_topic": f"{prefix}.frontier",
        "hosts_topic": f"{prefix}.hosts",
        "cache_index_topic": f"{prefix}.cache.index",
        "cache_bodies_topic": f"{prefix}.cache.bodies",
        "monitor_ticks_topic": f"{prefix}.monitor.ticks",
        "fetcher_group_id": f"{group}-fetchers",
        "webhook_group_id": f"{group}-webhooks",
    }


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    if field == "kafka_bootstrap_servers":
        return "KAFKA_BOOTSTRAP_SERVERS"
    return f"{ENV_PREFIX}{field.upper()}"


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning a validation error into one line per bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = [f"{env_name(str(error['loc'][0]))}: {error['msg']}" for error in exc.errors()]
        raise ConfigurationError("; ".join(lines)) from None
