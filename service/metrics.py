"""One container for every Prometheus metric, on an injected registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PAGE_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
"""Page durations span local pages (~0.1 s) to slow sites at their deadline."""


class Metrics:
    """The worker's metrics; each test builds one on a fresh `CollectorRegistry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "crawl_requests_total", "Requests by outcome.", ["outcome"], registry=r
        )
        self.pages = Counter("crawl_pages_total", "Pages by outcome.", ["outcome"], registry=r)
        self.page_seconds = Histogram(
            "crawl_page_seconds",
            "Time to render and extract one page.",
            buckets=PAGE_SECONDS_BUCKETS,
            registry=r,
        )
        self.pages_in_flight = Gauge(
            "crawl_pages_in_flight", "Pages being rendered now.", registry=r
        )
        self.browser_pages = Gauge(
            "crawl_browser_pages_open",
            "Pages open in Chromium now (rendering or pooled for their request's next URL).",
            registry=r,
        )
        self.pages_queued = Gauge("crawl_pages_queued", "Pages waiting for a slot.", registry=r)
        self.requests_in_flight = Gauge(
            "crawl_requests_in_flight",
            "Request records taken from Kafka and not finished.",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "crawl_consumer_lag",
            "End offset minus committed offset of each partition this worker owns.",
            ["partition"],
            registry=r,
        )
        self.pages_pending = Gauge(
            "crawl_pages_pending", "Pages taken from Kafka and not finished.", registry=r
        )
        self.page_consumer_lag = Gauge(
            "crawl_page_consumer_lag",
            "Pages topic: end offset minus committed offset of each partition this fetcher owns.",
            ["partition"],
            registry=r,
        )
        self.page_records_in_flight = Gauge(
            "crawl_page_records_pending",
            "Page records taken from Kafka and not finished (fetcher).",
            registry=r,
        )
        self.page_partitions_paused = Gauge(
            "crawl_page_consumer_paused",
            "1 while the fetcher has paused all its page partitions (memory or backlog).",
            registry=r,
        )
        self.page_partitions_held = Gauge(
            "crawl_page_partitions_held",
            "Page partitions the fetcher does not read now: a slot's worth of their records "
            "wait, they are read as far ahead as they may be, or intake is paused.",
            registry=r,
        )
        self.page_pauses = Counter(
            "crawl_page_consumer_pauses_total", "Times the fetcher paused intake.", registry=r
        )
        self.page_rebalances = Counter(
            "crawl_page_rebalances_total", "Page partition assignments received.", registry=r
        )
        self.page_records_skipped = Counter(
            "crawl_page_records_skipped_total",
            "Page records a previous fetcher had finished above the committed offset.",
            registry=r,
        )
        self.runs_waiting = Gauge(
            "crawl_pages_dispatched",
            "Pages this coordinator dispatched to the fetchers and not yet finished.",
            registry=r,
        )
        self.rebalances = Counter(
            "crawl_rebalances_total", "Partition assignments this worker received.", registry=r
        )
        self.last_poll = Gauge(
            "crawl_last_poll_timestamp_seconds",
            "Unix time of the consumer's last poll (time since = now minus this).",
            registry=r,
        )
        self.records_skipped = Counter(
            "crawl_records_skipped_total",
            "Records a previous owner had finished above the committed offset (not re-run).",
            registry=r,
        )
        self.control_records_skipped = Counter(
            "crawl_control_records_skipped_total",
            "Control records skipped, by reason (too_large, not_json, unknown_type, invalid,"
            " no_key, failed): each logged at warning, none fatal.",
            ["reason"],
            registry=r,
        )
        self.internal_records_rejected = Counter(
            "crawl_internal_records_rejected_total",
            "Internal records (pages, frontier, hosts, cache) ignored, by topic and reason:"
            " foreign (another deployment's) or forged (no valid authenticity tag).",
            ["topic", "reason"],
            registry=r,
        )
        self.publish_retries = Counter(
            "crawl_publish_retries_total",
            "Messages sent again after a retriable broker error.",
            registry=r,
        )
        self.commits = Counter("crawl_commits_total", "Offset commits sent to Kafka.", registry=r)
        self.dead_letters = Counter(
            "crawl_dead_letters_total",
            "Messages sent to the dead-letter topic.",
            ["code"],
            registry=r,
        )
        self.page_retries = Counter(
            "crawl_page_retries_total", "Pages tried again.", ["reason"], registry=r
        )
        self.cache_lookups = Counter(
            "crawl_cache_lookups_total",
            "Pages by what the page cache did for them: hit, revalidated, miss, bypass, "
            "cache_miss (cache only, no entry).",
            ["outcome"],
            registry=r,
        )
        self.cache_stores = Counter(
            "crawl_cache_stores_total",
            "Fetched pages by whether the page cache stored them: stored, not_storable "
            "(no-store, private, not a 200), too_large, failed.",
            ["outcome"],
            registry=r,
        )
        self.changes = Counter(
            "crawl_changes_total",
            "Tracked pages by how they compare with their history: new, same, changed, "
            "removed, failed (tracking itself failed; the page went out untracked).",
            ["status"],
            registry=r,
        )
        self.cache_bytes_saved = Counter(
            "crawl_cache_bytes_saved_total",
            "Bytes of documents answered from the page cache instead of fetched.",
            registry=r,
        )
        self.memory_limit = Gauge(
            "crawl_memory_limit_bytes", "Memory limit the governor works against.", registry=r
        )
        self.memory_working_set = Gauge(
            "crawl_memory_working_set_bytes",
            "Working set of the cgroup whose limit applies (the worker's own when none does).",
            registry=r,
        )
        self.memory_tree_pss = Gauge(
            "crawl_memory_tree_pss_bytes",
            "PSS of the worker and its browser processes.",
            registry=r,
        )
        self.memory_headroom = Gauge(
            "crawl_memory_headroom_bytes", "Limit minus usage.", registry=r
        )
        self.memory_bound = Gauge(
            "crawl_memory_bound",
            "1 for the limit with the least headroom now (a cgroup level: own, parent,"
            " ancestor_N, above_mount; or configured, host), 0 for those that bound before.",
            ["by"],
            registry=r,
        )
        self.page_cost = Gauge(
            "crawl_page_cost_bytes", "Learned memory cost of one open page.", registry=r
        )
        self.concurrency_limit = Gauge(
            "crawl_concurrency_limit", "Pages the governor lets run at once.", registry=r
        )
        self.paused = Gauge(
            "crawl_consumer_paused", "1 while the requests partitions are paused.", registry=r
        )
        self.pauses = Counter(
            "crawl_consumer_pauses_total", "Times the consumer paused on backpressure.", registry=r
        )
        self.browser_restarts = Counter(
            "crawl_browser_restarts_total",
            "Browsers replaced, once each: died, pages (served their count), memory (grew).",
            ["reason"],
            registry=r,
        )
        self.browser_contexts = Counter(
            "crawl_browser_contexts_total",
            "Browser contexts handed to requests without a session, by where they came from"
            " (wiped after an earlier request, spare, new).",
            ["source"],
            registry=r,
        )
        self.pages_rendered = Counter(
            "crawl_pages_rendered_total",
            "Pages fetched, by the path that produced the result (browser, http).",
            ["path"],
            registry=r,
        )
        self.render_escalations = Counter(
            "crawl_render_escalations_total",
            "Pages of `render: auto` sent to the browser, by reason.",
            ["reason"],
            registry=r,
        )
        self.pages_shed = Counter(
            "crawl_pages_shed_total", "In-flight pages handed back at critical memory.", registry=r
        )
