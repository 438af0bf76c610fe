#!/usr/bin/env bash
# Kafka ACLs for one Crawlstream deployment: producers write requests and cancels only,
# workers own the internal topics. Run with Kafka's own kafka-acls.sh against a cluster
# whose authorizer is on (KRaft: authorizer.class.name=
# org.apache.kafka.metadata.authorizer.StandardAuthorizer), as an admin principal.
#
#   BOOTSTRAP=broker:9093 ADMIN_CONFIG=admin.properties \
#   WORKER=User:crawl-worker PRODUCER=User:crawl-producer GATEWAY=User:crawl-gateway \
#   GROUP=crawlstream deploy/kafka/acls.sh
#
# GROUP is the deployment's CRAWL_GROUP_ID: the internal topics and groups follow from it
# (docs/tenancy.md). Topic names below are the defaults; set REQUESTS, RESULTS, PROGRESS,
# CONTROL, DEAD_LETTER, MONITORS when the deployment names its own. DRY_RUN=1 prints the commands.
set -euo pipefail

: "${BOOTSTRAP:?broker address, e.g. broker:9093}"
: "${WORKER:?the principal of the workers, e.g. User:crawl-worker}"
: "${PRODUCER:?the principal of services that submit requests, e.g. User:crawl-producer}"
GATEWAY="${GATEWAY:-}"
GROUP="${GROUP:-crawlstream}"
REQUESTS="${REQUESTS:-crawl.requests}"
RESULTS="${RESULTS:-crawl.results}"
PROGRESS="${PROGRESS:-crawl.progress}"
CONTROL="${CONTROL:-crawl.control}"
DEAD_LETTER="${DEAD_LETTER:-crawl.dead-letter}"
MONITORS="${MONITORS:-crawl.monitors}"
KAFKA_ACLS="${KAFKA_ACLS:-kafka-acls.sh}"

if [[ "$GROUP" == "crawlstream" ]]; then
  INTERNAL="crawl."          # crawl.pages, crawl.frontier, crawl.hosts, crawl.cache.*
  INTERNAL_TOPICS=(crawl.pages crawl.frontier crawl.hosts crawl.cache.index crawl.cache.bodies
    crawl.monitor.ticks)
else
  INTERNAL="crawl.${GROUP}."  # crawl.<group>.pages, ...
  INTERNAL_TOPICS=()
fi

acl() {
  local command=("$KAFKA_ACLS" --bootstrap-server "$BOOTSTRAP")
  if [[ -n "${ADMIN_CONFIG:-}" ]]; then command+=(--command-config "$ADMIN_CONFIG"); fi
  command+=(--add --force "$@")
  if [[ -n "${DRY_RUN:-}" ]]; then echo "${command[*]}"; else "${command[@]}"; fi
}

# Workers: read requests and control, write every output; own the internal topics (read,
# write, create) and their groups (coordinators, fetchers).
acl --allow-principal "$WORKER" --operation Read --operation Describe --topic "$REQUESTS"
acl --allow-principal "$WORKER" --operation Read --operation Describe --topic "$CONTROL"
acl --allow-principal "$WORKER" --operation Read --operation Describe --topic "$MONITORS"
# a monitor's tick is a request the coordinator owning the monitor produces
acl --allow-principal "$WORKER" --operation Write --topic "$REQUESTS"
for topic in "$RESULTS" "$PROGRESS" "$DEAD_LETTER"; do
  acl --allow-principal "$WORKER" --operation Write --operation Describe --topic "$topic"
done
if ((${#INTERNAL_TOPICS[@]})); then
  for topic in "${INTERNAL_TOPICS[@]}"; do
    acl --allow-principal "$WORKER" --operation All --topic "$topic"
  done
else
  acl --allow-principal "$WORKER" --operation All --topic "$INTERNAL" --resource-pattern-type prefixed
fi
acl --allow-principal "$WORKER" --operation Read --operation Describe --group "$GROUP"
acl --allow-principal "$WORKER" --operation Read --operation Describe --group "${GROUP}-fetchers"
acl --allow-principal "$WORKER" --operation Create --cluster
acl --allow-principal "$WORKER" --operation IdempotentWrite --cluster

# Producers: write requests and cancels, read what comes back. Nothing on the internal
# topics: a producer that could write crawl.pages could put forged results in any request's
# stream (the workers also check each internal record's tag, CRAWL_CLUSTER_SECRET).
for topic in "$REQUESTS" "$CONTROL" "$MONITORS"; do
  acl --allow-principal "$PRODUCER" --operation Write --operation Describe --topic "$topic"
done
for topic in "$RESULTS" "$PROGRESS" "$MONITORS"; do
  acl --allow-principal "$PRODUCER" --operation Read --operation Describe --topic "$topic"
done
acl --allow-principal "$PRODUCER" --operation IdempotentWrite --cluster

# The gateway submits and follows jobs like a producer, reads the frontier for `map`
# (it checks the records' tags too: give it the workers' CRAWL_CLUSTER_SECRET) and the
# monitors' ticks (the `skipped_overlap` checks, signed by their coordinator).
if [[ -n "$GATEWAY" ]]; then
  for topic in "$REQUESTS" "$CONTROL" "$MONITORS"; do
    acl --allow-principal "$GATEWAY" --operation Write --operation Describe --topic "$topic"
  done
  for topic in "$RESULTS" "$PROGRESS" "$MONITORS" "$REQUESTS" "${INTERNAL}frontier" \
    "${INTERNAL}monitor.ticks"; do
    acl --allow-principal "$GATEWAY" --operation Read --operation Describe --topic "$topic"
  done
  acl --allow-principal "$GATEWAY" --operation IdempotentWrite --cluster
fi
