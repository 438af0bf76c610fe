"""Crawlstream: a Kafka-native crawl microservice."""
