#!/bin/sh
# Kafka's own TopicCommand (kafka-tools), as bin/kafka-topics.sh of the distribution runs it;
# the client compiler only, so the compose health check costs little CPU.
exec java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j.configuration=file:/opt/kafka/config/tools-log4j.properties \
    -cp '/opt/kafka/tools/*' org.apache.kafka.tools.TopicCommand "$@"
