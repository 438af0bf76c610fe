"""A job's webhook target, sealed: the gateway (or a worker at intake) seals its URL and
headers so that no credential is echoed on results or events; the dispatcher opens it and
signs with the tenant's secret. Pure, below both the gateway and the webhooks."""
