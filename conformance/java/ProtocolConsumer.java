import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A subscribe-mode KafkaConsumer of either group protocol, logging what it sees, with wall-clock
 * times, for a test to check ownership intervals across processes.
 *
 * PROTOCOL is "consumer" (KIP-848: group.protocol=consumer, the broker assigns; ASSIGNOR, when
 * not "-", goes to group.remote.assignor: uniform or range) or "classic" (ASSIGNOR is range or
 * cooperative-sticky). With the consumer protocol the client rejects session.timeout.ms,
 * heartbeat.interval.ms and partition.assignment.strategy, so none is set: the broker's
 * group.consumer.* settings decide.
 *
 * Writes one line per event to OUT: "S t" at start, "A p t" when partition p is assigned,
 * "V p t" when revoked, "V p t lost" when lost, "R p offset value" per record, "G epoch" when
 * the generation / member epoch changes, "C t" after close() returned, then "CLOSED". t is
 * microseconds since the epoch (CLOCK_REALTIME, the clock Python's time.time_ns() reads),
 * taken at the start of the callback: a revocation is written before the client acknowledges
 * it to the coordinator, an assignment after the coordinator handed it out. Auto-commit is on
 * (every second, on revocation and on close). Runs until STOP_FILE exists or its parent is gone.
 *
 * usage: ProtocolConsumer BOOTSTRAP GROUP TOPIC OUT STOP_FILE PROTOCOL [ASSIGNOR|-] [INSTANCE_ID|-] [CLIENT_ID]
 */
public final class ProtocolConsumer {
    private static final String USAGE =
            "ProtocolConsumer BOOTSTRAP GROUP TOPIC OUT STOP_FILE PROTOCOL [ASSIGNOR|-] [INSTANCE_ID|-] [CLIENT_ID]";

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    public static void main(String[] args) throws IOException {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String group = Conformance.arg(args, 1, USAGE);
        String topic = Conformance.arg(args, 2, USAGE);
        String out = Conformance.arg(args, 3, USAGE);
        Path stopFile = Path.of(Conformance.arg(args, 4, USAGE));
        String protocol = Conformance.arg(args, 5, USAGE);
        String assignor = args.length > 6 && !args[6].equals("-") ? args[6] : null;
        String instanceId = args.length > 7 && !args[7].equals("-") ? args[7] : null;
        String clientId = args.length > 8 ? args[8] : "java-" + protocol;

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "1000");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        switch (protocol) {
            case "consumer" -> {
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                if (assignor != null) {
                    props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
                }
            }
            case "classic" -> {
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
                props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
                String strategy = switch (assignor == null ? "range" : assignor) {
                    case "range" -> RangeAssignor.class.getName();
                    case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
                    default -> throw new IllegalArgumentException("unknown classic assignor " + assignor);
                };
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy);
            }
            default -> throw new IllegalArgumentException("unknown group protocol " + protocol + "\n" + USAGE);
        }
        if (instanceId != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }

        try (PrintWriter events = new PrintWriter(new BufferedWriter(
                new FileWriter(out, StandardCharsets.UTF_8, true), 1 << 16))) {
            events.println("S " + nowMicros());
            events.flush();
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    long t = nowMicros();
                    partitions.forEach(tp -> events.println("V " + tp.partition() + " " + t));
                    events.flush();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    long t = nowMicros();
                    partitions.forEach(tp -> events.println("A " + tp.partition() + " " + t));
                    events.flush();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    long t = nowMicros();
                    partitions.forEach(tp -> events.println("V " + tp.partition() + " " + t + " lost"));
                    events.flush();
                }
            };
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
            consumer.subscribe(List.of(topic), listener);
            int generation = Integer.MIN_VALUE;
            java.util.Optional<ProcessHandle> parent = ProcessHandle.current().parent();
            while (!Files.exists(stopFile) && parent.map(ProcessHandle::isAlive).orElse(false)) {
                try {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        events.println("R " + record.partition() + " " + record.offset() + " "
                                + new String(record.value(), StandardCharsets.UTF_8));
                    }
                    int current = consumer.groupMetadata().generationId();
                    if (current != generation) {
                        generation = current;
                        events.println("G " + generation);
                    }
                } catch (org.apache.kafka.common.errors.RetriableException error) {
                    // e.g. the coordinator restarting: the client recovers by itself
                    events.println("E " + error);
                }
                events.flush();
            }
            consumer.close(Duration.ofSeconds(20));
            events.println("C " + nowMicros());
            events.println("CLOSED");
        }
    }
}
