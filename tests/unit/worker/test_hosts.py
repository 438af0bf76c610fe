"""The host a page counts against for the per-host limit."""

from __future__ import annotations

from service.worker.hosts import host_key


def test_host_key_ignores_case_port_and_path():
    assert host_key("http://Example.COM:8080/a?b") == host_key("https://example.com/c")
    assert host_key("http://[::1]:80/") == "::1"
