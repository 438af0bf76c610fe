#!/usr/bin/env bash
# `make test-container`: the image and docker-compose.yml run for real (docs/containers.md).
# 1. a container engine: the one that answers, else Debian's dockerd started here (overlay2
#    storage, vfs where overlay2 does not start; no bridge or iptables: the containers use the
#    host's network) and stopped at the end, after the lane's containers are removed;
# 2. the base images the Dockerfile and docker-compose.yml name, made from what this machine
#    reaches when no registry serves them: a Debian bookworm root file system (mmdebstrap) as
#    the Python base, and a Kafka image from the official jars on Maven Central;
# 3. the project's image from the project's Dockerfile (BASE_IMAGE: the stand-in base);
# 4. tests/deploy/test_container.py with CRAWL_CONTAINER_LANE=1 (it skips without); the
#    script's arguments go to pytest (`make test-container LANE_ARGS="-k kill"`).
#    LANE_BUILD_ONLY=1 (`make container-images`) stops after step 3.
# Cached between runs: the root file system and the Kafka jars under $CACHE, the images and
# their build layers in the engine's store.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=scripts/container
CACHE=${CRAWLSTREAM_CACHE:-/var/cache/crawlstream}
export DOCKER_BUILDKIT=0  # the legacy builder: no buildx plugin is needed
BASE_TAG=crawlstream-lane/python:3.11-slim-bookworm
KAFKA_TAG=crawlstream-lane/kafka:4.1.1
IMAGE_TAG=crawlstream:lane
ENGINE_DEADLINE_S=60
PROJECT=crawlstream-lane  # the compose project of tests/deploy/test_container.py
LANE_PORTS_RE="9092|9093|3002|9400|9401|9402|9403"  # compose.lane.yml's listeners
LOGS=${CRAWL_LANE_LOGS:-/tmp/crawlstream-lane}
export CRAWL_LANE_LOGS=$LOGS
mkdir -p "$LOGS"
started=$(date +%s)

# docker build with the host's network (no bridge); its output in $LOGS, shown on failure
build() {
    local log="$LOGS/build-${1//[^a-z0-9.]/-}.log"
    if ! docker build --network host --build-arg BASE_IMAGE="$BASE_TAG" -t "$1" "$2" >"$log" 2>&1; then
        tail -40 "$log"
        return 1
    fi
}
say() { printf '[lane %4ds] %s\n' $(($(date +%s) - started)) "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

need=()
have dockerd || need+=(docker.io)
have docker-compose || need+=(docker-compose)
have mmdebstrap || need+=(mmdebstrap)
if ((${#need[@]})); then
    say "installing ${need[*]} from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

engine_pid=
# The lane's containers, by project label and by the names the by-hand tests give them,
# with their anonymous volumes; run at the end whatever happened (pytest may die mid-run).
remove_lane_containers() {
    docker info >/dev/null 2>&1 || return 0
    local ids
    ids=$( (docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"
            docker ps -aq --filter "name=^lane-hand-") | sort -u)
    if [[ -n $ids ]]; then
        say "removing the lane's containers left running"
        docker rm -f -v $ids >/dev/null || true
    fi
    ids=$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")
    [[ -z $ids ]] || docker network rm $ids >/dev/null || true
}
stop_engine() {
    [[ -n $engine_pid ]] || return 0
    say "stopping the engine this lane started (pid $engine_pid)"
    kill -TERM "$engine_pid" 2>/dev/null || true
    for _ in $(seq "$ENGINE_DEADLINE_S"); do kill -0 "$engine_pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$engine_pid" 2>/dev/null; then
        say "the engine did not stop within ${ENGINE_DEADLINE_S} s: SIGKILL"
        kill -KILL "$engine_pid" 2>/dev/null || true
    fi
    wait "$engine_pid" 2>/dev/null || true
    engine_pid=
}
# The CPU weight of the engine's containers. Where every process runs in the root cgroup (this
# machine: no systemd, no slices), each runnable host thread weighs 1024, while all containers
# together, in the engine's cgroup `docker`, weigh 1024 too: under the load average of 100 that
# the suite and other work give this machine, the containers got about 1% of its two cores,
# Chromium in them could not open a page within its 15 s deadline and every health check timed
# out. The lane gives that cgroup the weight of CPU_WEIGHT_THREADS host threads (its containers
# run about 40 processes) while it runs, and puts the weight it found back at the end.
CPU_WEIGHT_THREADS=32
weight_file= weight_found= made_cgroup=
weigh_containers() {
    grep -qE '^[0-9]+:(cpu|cpu,cpuacct|cpuacct,cpu)?:/$' /proc/self/cgroup || return 0
    [[ $(docker info --format '{{.CgroupDriver}}') == cgroupfs ]] || return 0
    local weight
    # the engine makes its cgroup with its first container; the lane's weight goes on first
    if [[ -d /sys/fs/cgroup/cpu && ! -d /sys/fs/cgroup/cpu/docker ]]; then
        mkdir /sys/fs/cgroup/cpu/docker && made_cgroup=/sys/fs/cgroup/cpu/docker
    fi
    if [[ -d /sys/fs/cgroup/cpu/docker ]]; then  # cgroup v1
        weight_file=/sys/fs/cgroup/cpu/docker/cpu.shares weight=$((CPU_WEIGHT_THREADS * 1024))
    elif [[ -f /sys/fs/cgroup/docker/cpu.weight ]]; then  # cgroup v2: 100 is a thread's
        weight_file=/sys/fs/cgroup/docker/cpu.weight weight=$((CPU_WEIGHT_THREADS * 100))
    else
        return 0
    fi
    weight_found=$(cat "$weight_file")
    say "the containers' CPU weight: $weight ($weight_file, was $weight_found)"
    echo "$weight" >"$weight_file"
}
unweigh_containers() {
    [[ -n $weight_found && -e $weight_file ]] || return 0
    echo "$weight_found" >"$weight_file" || true
    weight_found=
    # made by the lane: removed once empty (an engine the lane did not start may still use it)
    [[ -z $made_cgroup ]] || rmdir "$made_cgroup" 2>/dev/null || true
}
finish() {
    remove_lane_containers
    stop_engine
    unweigh_containers
}
trap finish EXIT
# dockerd with storage driver $1; false (and nothing left running) when it does not answer
start_engine() {
    echo "--- dockerd --storage-driver=$1 ($(date -u +%FT%TZ))" >>"$CACHE/dockerd.log"
    dockerd --storage-driver="$1" --bridge=none --iptables=false \
        --pidfile "$CACHE/dockerd.pid" >>"$CACHE/dockerd.log" 2>&1 &
    engine_pid=$!
    for _ in $(seq "$ENGINE_DEADLINE_S"); do
        docker info >/dev/null 2>&1 && return 0
        kill -0 "$engine_pid" 2>/dev/null || break
        sleep 1
    done
    stop_engine
    return 1
}
if docker info >/dev/null 2>&1; then
    say "using the engine that answers ($(docker info --format '{{.Driver}}') storage)"
else
    mkdir -p "$CACHE"
    say "no engine answers: starting dockerd (log: $CACHE/dockerd.log)"
    # overlay2 shares layers instead of copying the whole file system for every build step
    # and container (vfs); vfs works where overlay2 does not (e.g. an overlay root)
    if ! start_engine overlay2; then
        say "overlay2 storage unavailable here: vfs"
        start_engine vfs || { tail -20 "$CACHE/dockerd.log"; exit 1; }
    fi
fi

remove_lane_containers  # an earlier run's, should one have been killed
weigh_containers

# The ports the compose services bind on the host's network (tests/deploy/compose.lane.yml):
# a process holding one would fail the lane later, and less clearly.
busy=$(ss -Hltn | awk '{print $4}' | grep -Eo "[0-9]+$" | { grep -xE "$LANE_PORTS_RE" || true; } \
    | sort -un | paste -sd ' ' -)
if [[ -n $busy ]]; then
    say "ports the compose services need are taken on this machine: $busy"
    ss -ltnp | grep -E ":(${busy// /|})\b" || true
    exit 1
fi

say "base image $BASE_TAG"
"$here/base-image.sh" "$BASE_TAG" "$CACHE"

say "Kafka image $KAFKA_TAG"
context=$(mktemp -d)
trap 'rm -rf "$context"; finish' EXIT
broker_jars=$(.venv/bin/python -c 'from service.broker.jars import ensure_kafka_jars; print(ensure_kafka_jars())')
tools_jars="$CACHE/kafka-tools-$(sha256sum "$here/kafka/pom.xml" | cut -c1-12)"
if [[ ! -e $tools_jars/.complete ]]; then
    rm -rf "$tools_jars"
    mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$tools_jars" -DincludeScope=runtime
    touch "$tools_jars/.complete"
fi
cp "$here"/kafka/{Dockerfile,run,kafka-topics.sh,log4j.properties,tools-log4j.properties} "$context/"
mkdir "$context/libs" "$context/tools"
cp "$broker_jars"/*.jar "$context/libs/"
cp "$tools_jars"/*.jar "$context/tools/"
# touch-free copies keep the build cache: the legacy builder compares contents, not times
build "$KAFKA_TAG" "$context"

say "image $IMAGE_TAG from ./Dockerfile"
build_started=$(date +%s)
build "$IMAGE_TAG" .
build_s=$(($(date +%s) - build_started))
size=$(docker image inspect --format '{{.Size}}' "$IMAGE_TAG")
say "image built in ${build_s} s, $((size / 1000000)) MB"
if [[ ${LANE_BUILD_ONLY:-} == 1 ]]; then
    say "images ready (LANE_BUILD_ONLY=1: no tests)"
    exit 0
fi

say "tests/deploy/test_container.py"
CRAWL_CONTAINER_LANE=1 CRAWL_LANE_IMAGE="$IMAGE_TAG" CRAWL_LANE_KAFKA_IMAGE="$KAFKA_TAG" \
    .venv/bin/pytest -q -p no:xdist -p no:cacheprovider tests/deploy/test_container.py "$@" \
    || { say "failed; logs in $LOGS"; exit 1; }
say "passed"
