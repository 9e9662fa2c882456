import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka transactions with the Java client (kafka-clients 3.9.1): what Kafka's broker does.
 *
 * Steps: commit/abort seen through read_committed and read_uncommitted consumers; endOffsets of a
 * read_committed consumer stop at the last stable offset while a transaction is open;
 * consume-transform-produce with sendOffsetsToTransaction(groupMetadata) (KIP-447, TxnOffsetCommit
 * with member id and generation), the group's offsets visible only on commit; a second producer
 * with the same transactional.id fences the first; the AdminClient's describeTransactions,
 * listTransactions and describeProducers.
 *
 * usage: TransactionCheck BOOTSTRAP PREFIX
 */
public final class TransactionCheck {
    private static final String USAGE = "TransactionCheck BOOTSTRAP PREFIX";
    private static final int PARTITIONS = 3;
    private static final Duration READ_DEADLINE = Duration.ofSeconds(30);

    private final String bootstrap;
    private final String prefix;
    private final Admin admin;

    private TransactionCheck(String bootstrap, String prefix, Admin admin) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.admin = admin;
    }

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String prefix = Conformance.arg(args, 1, USAGE);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        int status;
        try (Admin admin = Admin.create(props)) {
            TransactionCheck check = new TransactionCheck(bootstrap, prefix, admin);
            status = Conformance.runSteps("TransactionCheck", List.of(
                    new Conformance.Step("commit and abort through read_committed", check::commitAndAbort),
                    new Conformance.Step("endOffsets stop at the last stable offset", check::lastStableOffset),
                    new Conformance.Step("consume-transform-produce with group offsets", check::consumeTransformProduce),
                    new Conformance.Step("a new producer fences the old one", check::fencing),
                    new Conformance.Step("describe/list transactions, describe producers", check::adminViews)));
        }
        System.exit(status);
    }

    // ------------------------------------------------------------------ clients

    private void createTopic(String topic, int partitions) throws Exception {
        Conformance.await(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all(),
                "createTopics(" + topic + ")");
    }

    private KafkaProducer<byte[], byte[]> producer(String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        producer.initTransactions();
        return producer;
    }

    private KafkaConsumer<byte[], byte[]> consumer(String isolation, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        }
        return new KafkaConsumer<>(props);
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, String prefix, int count) {
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, (prefix + i).getBytes()));
        }
        producer.flush();
    }

    /** Every value an assign-mode consumer with `isolation` reads up to the end offsets it sees. */
    private List<String> readAll(String topic, String isolation) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(isolation, null)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            List<String> values = new ArrayList<>();
            long deadline = System.nanoTime() + READ_DEADLINE.toNanos();
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                Conformance.check(System.nanoTime() < deadline, "%s consumer stuck below end offsets %s", isolation, end);
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(new String(record.value()));
                }
            }
            values.sort(null);
            return values;
        }
    }

    private static List<String> values(String prefix, int count) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(prefix + i);
        }
        return out;
    }

    private static List<String> sorted(List<String> a, List<String> b) {
        List<String> out = new ArrayList<>(a);
        out.addAll(b);
        out.sort(null);
        return out;
    }

    // ------------------------------------------------------------------ steps

    private void commitAndAbort() throws Exception {
        String topic = prefix + "-basic";
        createTopic(topic, PARTITIONS);
        try (KafkaProducer<byte[], byte[]> producer = producer(prefix + "-basic-tx")) {
            producer.beginTransaction();
            send(producer, topic, "c1-", 12);
            producer.commitTransaction();
            producer.beginTransaction();
            send(producer, topic, "a-", 12);
            producer.abortTransaction();
            producer.beginTransaction();
            send(producer, topic, "c2-", 12);
            producer.commitTransaction();
        }
        List<String> committed = sorted(values("c1-", 12), values("c2-", 12));
        Conformance.checkEquals(committed, readAll(topic, "read_committed"), "read_committed values");
        Conformance.checkEquals(sorted(committed, values("a-", 12)), readAll(topic, "read_uncommitted"),
                "read_uncommitted values");
    }

    private void lastStableOffset() throws Exception {
        String topic = prefix + "-lso";
        createTopic(topic, PARTITIONS);
        try (KafkaProducer<byte[], byte[]> producer = producer(prefix + "-lso-tx");
             KafkaConsumer<byte[], byte[]> committed = consumer("read_committed", null);
             KafkaConsumer<byte[], byte[]> uncommitted = consumer("read_uncommitted", null)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "x".getBytes()));
            producer.send(new ProducerRecord<>(topic, 0, null, "y".getBytes()));
            producer.flush();
            Conformance.checkEquals(0L, committed.endOffsets(List.of(tp)).get(tp), "read_committed end offset");
            Conformance.checkEquals(2L, uncommitted.endOffsets(List.of(tp)).get(tp), "read_uncommitted end offset");
            producer.commitTransaction();
            Conformance.checkEquals(3L, committed.endOffsets(List.of(tp)).get(tp),
                    "read_committed end offset after the commit marker");
        }
    }

    private void consumeTransformProduce() throws Exception {
        String source = prefix + "-in";
        String sink = prefix + "-out";
        String group = prefix + "-ctp";
        createTopic(source, PARTITIONS);
        createTopic(sink, PARTITIONS);
        int count = 45;
        try (KafkaProducer<byte[], byte[]> plain = producer(prefix + "-feed-tx")) {
            plain.beginTransaction();
            send(plain, source, "in-", count);
            plain.commitTransaction();
        }
        try (KafkaProducer<byte[], byte[]> producer = producer(prefix + "-ctp-tx");
             KafkaConsumer<byte[], byte[]> consumer = consumer("read_committed", group)) {
            consumer.subscribe(List.of(source));
            // an aborted round first: neither its output nor its offsets count
            ConsumerRecords<byte[], byte[]> first = ConsumerRecords.empty();
            long deadline = System.nanoTime() + READ_DEADLINE.toNanos();
            while (first.isEmpty()) {
                Conformance.check(System.nanoTime() < deadline, "no input consumed from %s", source);
                first = consumer.poll(Duration.ofMillis(200));
            }
            producer.beginTransaction();
            for (ConsumerRecord<byte[], byte[]> record : first) {
                producer.send(new ProducerRecord<>(sink, record.partition(), null, ("ABORTED-" + new String(record.value())).getBytes()));
            }
            producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
            producer.abortTransaction();
            Map<TopicPartition, OffsetAndMetadata> afterAbort = Conformance.await(
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
            Conformance.check(afterAbort.isEmpty(), "offsets committed by an aborted transaction: %s", afterAbort);
            for (TopicPartition tp : consumer.assignment()) {
                consumer.seek(tp, 0);
            }
            int done = 0;
            while (done < count) {
                Conformance.check(System.nanoTime() < deadline + READ_DEADLINE.toNanos(), "processed only %d/%d", done, count);
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    producer.send(new ProducerRecord<>(sink, record.partition(), null, ("out-" + new String(record.value())).getBytes()));
                }
                producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
                producer.commitTransaction();
                done += records.count();
            }
            Conformance.checkEquals(count, done, "records processed");
        }
        Map<TopicPartition, OffsetAndMetadata> committed = Conformance.await(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
        Map<TopicPartition, Long> expected = new HashMap<>();
        Map<TopicPartition, Long> actual = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> probe = consumer("read_committed", null)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(source, p));
            }
            expected.putAll(probe.endOffsets(partitions));
        }
        committed.forEach((tp, om) -> actual.put(tp, om.offset()));
        Conformance.checkEquals(expected, actual, "group offsets committed with the transactions");
        List<String> out = new ArrayList<>();
        for (String v : values("in-", count)) {
            out.add("out-" + v);
        }
        out.sort(null);
        Conformance.checkEquals(out, readAll(sink, "read_committed"), "transformed output");
    }

    private static Map<TopicPartition, OffsetAndMetadata> positions(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        }
        return offsets;
    }

    private void fencing() throws Exception {
        String topic = prefix + "-fence";
        createTopic(topic, PARTITIONS);
        String transactionalId = prefix + "-fence-tx";
        KafkaProducer<byte[], byte[]> zombie = producer(transactionalId);
        try {
            zombie.beginTransaction();
            send(zombie, topic, "zombie-", 6);
            try (KafkaProducer<byte[], byte[]> fresh = producer(transactionalId)) {
                fresh.beginTransaction();
                send(fresh, topic, "fresh-", 6);
                fresh.commitTransaction();
            }
            try {
                zombie.commitTransaction();
                throw new Conformance.CheckFailed("the fenced producer's commit succeeded");
            } catch (ProducerFencedException | InvalidProducerEpochException expected) {
                // what Kafka answers a fenced producer
            } catch (KafkaException other) {
                Throwable cause = other.getCause();
                Conformance.check(cause instanceof ProducerFencedException || cause instanceof InvalidProducerEpochException,
                        "fenced commit failed with %s", Conformance.describe(other));
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        Conformance.checkEquals(values("fresh-", 6), readAll(topic, "read_committed"), "read_committed values");
    }

    private void adminViews() throws Exception {
        String topic = prefix + "-admin";
        createTopic(topic, PARTITIONS);
        String transactionalId = prefix + "-admin-tx";
        try (KafkaProducer<byte[], byte[]> producer = producer(transactionalId)) {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 1, null, "v".getBytes()));
            producer.flush();
            TransactionDescription ongoing = Conformance.await(
                    admin.describeTransactions(List.of(transactionalId)).description(transactionalId),
                    "describeTransactions");
            long producerId = ongoing.producerId();
            Conformance.checkEquals(TransactionState.ONGOING, ongoing.state(), "transaction state");
            Conformance.checkEquals(Set.of(new TopicPartition(topic, 1)), ongoing.topicPartitions(),
                    "transaction partitions");
            Collection<TransactionListing> listings = Conformance.await(admin.listTransactions().all(), "listTransactions");
            Conformance.check(listings.stream().anyMatch(l -> l.transactionalId().equals(transactionalId)
                            && l.producerId() == producerId && l.state() == TransactionState.ONGOING),
                    "listTransactions does not show %s: %s", transactionalId, listings);
            TopicPartition tp = new TopicPartition(topic, 1);
            List<ProducerState> producers = Conformance.await(
                    admin.describeProducers(List.of(tp)).partitionResult(tp), "describeProducers").activeProducers();
            Conformance.check(producers.stream().anyMatch(p -> p.producerId() == producerId
                            && p.currentTransactionStartOffset().orElse(-1L) == 0L),
                    "describeProducers does not show the open transaction: %s", producers);
            producer.commitTransaction();
            TransactionDescription done = Conformance.await(
                    admin.describeTransactions(List.of(transactionalId)).description(transactionalId),
                    "describeTransactions");
            Conformance.checkEquals(TransactionState.COMPLETE_COMMIT, done.state(), "state after commit");
        }
    }
}
