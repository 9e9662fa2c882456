import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a {@link RecordPlan} back with an assign-mode KafkaConsumer and checks it byte for byte.
 *
 * No group is used (assign + seek), so only Metadata, ListOffsets and Fetch are exercised.
 * Checked: partition count, beginning/end offsets, each record's offset, key, value, headers,
 * timestamp and timestamp type, no extra records, and a fetch starting mid-batch (the broker
 * returns whole batches; the client must still see the exact requested offset first).
 *
 * usage: ConsumerCheck BOOTSTRAP TOPIC PARTITIONS COUNT
 */
public final class ConsumerCheck {
    private static final String USAGE = "ConsumerCheck BOOTSTRAP TOPIC PARTITIONS COUNT";
    private static final Duration READ_DEADLINE = Duration.ofSeconds(45);

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        int partitions = Integer.parseInt(Conformance.arg(args, 2, USAGE));
        int count = Integer.parseInt(Conformance.arg(args, 3, USAGE));
        RecordPlan plan = new RecordPlan(partitions, count);

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "conformance-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");

        int status;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> assignment = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assignment.add(new TopicPartition(topic, p));
            }
            List<List<RecordPlan.PlannedRecord>> expected = plan.byPartition();
            status = Conformance.runSteps("ConsumerCheck", List.of(
                    new Conformance.Step("partitionsFor(" + topic + ")", () -> checkPartitions(consumer, topic, partitions)),
                    new Conformance.Step("beginningOffsets/endOffsets", () -> checkOffsets(consumer, assignment, expected)),
                    new Conformance.Step("read all " + count + " records byte-exact",
                            () -> readAll(consumer, assignment, expected)),
                    new Conformance.Step("seek into the middle of a batch", () -> seekMiddle(consumer, assignment, expected))));
        }
        System.exit(status);
    }

    private static void checkPartitions(KafkaConsumer<byte[], byte[]> consumer, String topic, int partitions) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(20));
        Conformance.checkEquals(partitions, infos.size(), "partition count of " + topic);
        for (PartitionInfo info : infos) {
            Conformance.check(info.leader() != null && !info.leader().isEmpty(),
                    "partition %d has no leader in metadata", info.partition());
        }
    }

    private static void checkOffsets(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> assignment,
            List<List<RecordPlan.PlannedRecord>> expected) {
        Map<TopicPartition, Long> beginning = consumer.beginningOffsets(assignment, Duration.ofSeconds(20));
        Map<TopicPartition, Long> end = consumer.endOffsets(assignment, Duration.ofSeconds(20));
        for (TopicPartition tp : assignment) {
            Conformance.checkEquals(0L, beginning.get(tp), "beginning offset of " + tp);
            Conformance.checkEquals((long) expected.get(tp.partition()).size(), end.get(tp), "end offset of " + tp);
        }
    }

    private static void readAll(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> assignment,
            List<List<RecordPlan.PlannedRecord>> expected) {
        consumer.assign(assignment);
        consumer.seekToBeginning(assignment);
        int wanted = expected.stream().mapToInt(List::size).sum();
        Map<Integer, Integer> seen = new HashMap<>();
        int total = 0;
        long deadline = System.nanoTime() + READ_DEADLINE.toNanos();
        while (total < wanted) {
            if (System.nanoTime() > deadline) {
                throw new Conformance.CheckFailed("read only " + total + " of " + wanted + " records within "
                        + READ_DEADLINE.toSeconds() + " s; per partition " + seen);
            }
            ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
            for (ConsumerRecord<byte[], byte[]> record : batch) {
                int position = seen.getOrDefault(record.partition(), 0);
                List<RecordPlan.PlannedRecord> partitionPlan = expected.get(record.partition());
                Conformance.check(position < partitionPlan.size(),
                        "partition %d returned more records than were produced (offset %d)", record.partition(),
                        record.offset());
                compare(partitionPlan.get(position), position, record);
                seen.put(record.partition(), position + 1);
                total++;
            }
        }
        ConsumerRecords<byte[], byte[]> extra = consumer.poll(Duration.ofMillis(300));
        Conformance.check(extra.isEmpty(), "got %d records past the end", extra.count());
        for (TopicPartition tp : assignment) {
            Conformance.checkEquals((long) expected.get(tp.partition()).size(), consumer.position(tp),
                    "position of " + tp + " after reading everything");
        }
    }

    private static void seekMiddle(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> assignment,
            List<List<RecordPlan.PlannedRecord>> expected) {
        TopicPartition tp = assignment.get(0);
        List<RecordPlan.PlannedRecord> partitionPlan = expected.get(0);
        Conformance.check(partitionPlan.size() >= 3, "partition 0 needs at least 3 records for this check");
        long middle = partitionPlan.size() / 2 + 1;
        consumer.assign(List.of(tp));
        consumer.seek(tp, middle);
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
            if (!batch.isEmpty()) {
                ConsumerRecord<byte[], byte[]> first = batch.records(tp).get(0);
                Conformance.checkEquals(middle, first.offset(), "first offset after seek(" + middle + ")");
                compare(partitionPlan.get((int) middle), (int) middle, first);
                return;
            }
        }
        throw new Conformance.CheckFailed("no records after seek(" + tp + ", " + middle + ") within 10 s");
    }

    private static void compare(RecordPlan.PlannedRecord want, int offset, ConsumerRecord<byte[], byte[]> got) {
        String where = "partition " + got.partition() + " offset " + got.offset() + " (planned record "
                + want.index() + ")";
        Conformance.checkEquals((long) offset, got.offset(), where + ": offset");
        Conformance.check(Arrays.equals(want.key(), got.key()), "%s: key expected %s got %s", where,
                Conformance.hex(want.key()), Conformance.hex(got.key()));
        Conformance.check(Arrays.equals(want.value(), got.value()), "%s: value expected %s got %s", where,
                Conformance.hex(want.value()), Conformance.hex(got.value()));
        String headerProblem = RecordPlan.headerMismatch(want.headers(), got.headers().toArray());
        Conformance.check(headerProblem == null, "%s: %s", where, headerProblem);
        Conformance.checkEquals(want.timestamp(), got.timestamp(), where + ": timestamp");
        Conformance.checkEquals(TimestampType.CREATE_TIME, got.timestampType(), where + ": timestamp type");
    }

    private ConsumerCheck() {}
}
