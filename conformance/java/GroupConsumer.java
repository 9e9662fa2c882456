import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A subscribe-mode KafkaConsumer in a consumer group, logging what it sees for a test to check.
 *
 * Writes one line per event to OUT: "A p" when partition p is assigned, "V p" when revoked or
 * lost, "R p offset value" per record, "G generation" when the group generation changes, and
 * "CLOSED" after a clean close (which commits, auto-commit being on). Runs until STOP_FILE
 * exists. ASSIGNORS is a comma list of range, cooperative-sticky, roundrobin, sticky.
 *
 * usage: GroupConsumer BOOTSTRAP GROUP TOPIC OUT STOP_FILE ASSIGNORS [INSTANCE_ID|-] [SESSION_TIMEOUT_MS]
 */
public final class GroupConsumer {
    private static final String USAGE =
            "GroupConsumer BOOTSTRAP GROUP TOPIC OUT STOP_FILE ASSIGNORS [INSTANCE_ID|-] [SESSION_TIMEOUT_MS]";

    public static void main(String[] args) throws IOException {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String group = Conformance.arg(args, 1, USAGE);
        String topic = Conformance.arg(args, 2, USAGE);
        String out = Conformance.arg(args, 3, USAGE);
        Path stopFile = Path.of(Conformance.arg(args, 4, USAGE));
        String assignors = Conformance.arg(args, 5, USAGE);
        String instanceId = args.length > 6 && !args[6].equals("-") ? args[6] : null;
        String sessionTimeout = args.length > 7 ? args[7] : "10000";

        List<String> classes = new ArrayList<>();
        for (String name : assignors.split(",")) {
            classes.add(switch (name) {
                case "range" -> RangeAssignor.class.getName();
                case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
                case "roundrobin" -> RoundRobinAssignor.class.getName();
                case "sticky" -> StickyAssignor.class.getName();
                default -> throw new IllegalArgumentException("unknown assignor " + name);
            });
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-" + assignors);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "1000");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionTimeout);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
        if (instanceId != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }

        try (PrintWriter events = new PrintWriter(new BufferedWriter(
                new FileWriter(out, StandardCharsets.UTF_8, true), 1 << 16))) {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    partitions.forEach(tp -> events.println("V " + tp.partition()));
                    events.flush();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    partitions.forEach(tp -> events.println("A " + tp.partition()));
                    events.flush();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    onPartitionsRevoked(partitions);
                }
            };
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
            consumer.subscribe(List.of(topic), listener);
            int generation = -1;
            // until the stop file appears, or the test that started us is gone (no orphans)
            java.util.Optional<ProcessHandle> parent = ProcessHandle.current().parent();
            while (!Files.exists(stopFile) && parent.map(ProcessHandle::isAlive).orElse(false)) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    events.println("R " + record.partition() + " " + record.offset() + " "
                            + new String(record.value(), StandardCharsets.UTF_8));
                }
                int current = consumer.groupMetadata().generationId();
                if (current != generation) {
                    generation = current;
                    events.println("G " + generation);
                }
                events.flush();
            }
            consumer.close(Duration.ofSeconds(20));
            events.println("CLOSED");
        }
    }
}
