"""The fetcher: the page partitions of the hosts it owns, their slots, pacing and renders."""
