import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A replica moved between two log.dirs of one broker while it is produced to, through the AdminClient
 * calls behind kafka-log-dirs and kafka-reassign-partitions --reassignment-json-file with "log_dirs"
 * (alterReplicaLogDirs, describeReplicaLogDirs, describeLogDirs).
 *
 * <p>A default producer (acks=all, idempotent) writes COUNT numbered records of 1 KiB to partition 0 of
 * TOPIC (replication factor 1, on BROKER_ID) from a thread, paced at RECORDS_PER_SECOND. Once a fifth of
 * them are acknowledged,
 * alterReplicaLogDirs moves the replica to DEST_DIR; describeReplicaLogDirs is polled until DEST_DIR is
 * the current dir and there is no future dir (whether the future dir was seen on the way is printed),
 * which must happen before the producer is done, so the moved log takes appends too. Then every record
 * is acknowledged at offset = its number, an assign-mode consumer reads exactly COUNT records, each
 * byte-exact (value and CreateTime), in order, and describeLogDirs shows the partition in DEST_DIR only.
 *
 * <p>The topic may exist already (the test creates it to know which dir it lands in); it must be empty
 * and not live in DEST_DIR yet.
 *
 * <p>usage: LogDirMoveCheck BOOTSTRAP TOPIC BROKER_ID DEST_DIR COUNT
 */
public final class LogDirMoveCheck {
    private static final String USAGE = "LogDirMoveCheck BOOTSTRAP TOPIC BROKER_ID DEST_DIR COUNT";
    private static final int RECORD_BYTES = 1024;
    /**
     * The producer's pace (~15 MB/s). Unpaced, it can write as fast as the broker appends; on a loaded
     * machine (2 cores shared with other brokers) that is about as fast as the move copies, so the copy
     * only caught up once the producer was done, and the move was not shown to happen under writes.
     */
    private static final int RECORDS_PER_SECOND = 15_000;
    /** Small segments, so the move copies many of them and the log rolls while it is copied. */
    private static final String SEGMENT_BYTES = String.valueOf(1 << 20);
    private static final Duration PRODUCE_TIMEOUT = Duration.ofSeconds(120);
    private static final Duration MOVE_TIMEOUT = Duration.ofSeconds(90);
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(90);
    private static final Duration STATE_TIMEOUT = Duration.ofSeconds(30);

    private final String bootstrap;
    private final String topic;
    private final int brokerId;
    private final String destDir;
    private final int count;
    private final Admin admin;
    private final TopicPartition tp;
    private final TopicPartitionReplica replica;

    private String sourceDir;
    private Thread producerThread;
    private final AtomicInteger sent = new AtomicInteger();
    private final AtomicInteger acked = new AtomicInteger();
    private final AtomicLong producerDoneNanos = new AtomicLong();
    private final ConcurrentLinkedQueue<String> producerErrors = new ConcurrentLinkedQueue<>();
    /** Per record number: the acknowledged offset and timestamp (-1 while unacknowledged). */
    private final long[] ackOffsets;
    private final long[] ackTimestamps;
    private int ackedAtAlter;
    private long alterNanos;

    private LogDirMoveCheck(String bootstrap, String topic, int brokerId, String destDir, int count, Admin admin) {
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.brokerId = brokerId;
        this.destDir = destDir;
        this.count = count;
        this.admin = admin;
        this.tp = new TopicPartition(topic, 0);
        this.replica = new TopicPartitionReplica(topic, 0, brokerId);
        this.ackOffsets = new long[count];
        this.ackTimestamps = new long[count];
        Arrays.fill(ackOffsets, -1);
        Arrays.fill(ackTimestamps, -1);
    }

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        int brokerId = Integer.parseInt(Conformance.arg(args, 2, USAGE));
        String destDir = Conformance.arg(args, 3, USAGE);
        int count = Integer.parseInt(Conformance.arg(args, 4, USAGE));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-log-dir-move");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        int status;
        try (Admin admin = Admin.create(props)) {
            LogDirMoveCheck checks = new LogDirMoveCheck(bootstrap, topic, brokerId, destDir, count, admin);
            try {
                status = Conformance.runSteps("LogDirMoveCheck", checks.steps());
            } finally {
                checks.stopProducer();
            }
        }
        System.exit(status);
    }

    private List<Conformance.Step> steps() {
        return List.of(
                new Conformance.Step("createTopics " + topic + " (1 partition, replication factor 1) or use it",
                        this::createOrUseTopic),
                new Conformance.Step("describeReplicaLogDirs before the move: current dir is not " + destDir
                        + ", no future dir", this::describeBeforeMove),
                new Conformance.Step("producer thread (acks=all, idempotent) writing " + count + " records of "
                        + RECORD_BYTES + " bytes, " + RECORDS_PER_SECOND + "/s: a fifth acknowledged",
                        this::startProducer),
                new Conformance.Step("alterReplicaLogDirs " + replica + " -> " + destDir + " while producing",
                        this::alterReplicaLogDir),
                new Conformance.Step("describeReplicaLogDirs until current = " + destDir
                        + " and no future dir, before the producer is done", this::awaitMoved),
                new Conformance.Step("producer done: all " + count + " records acknowledged at offset = number",
                        this::awaitProducer),
                new Conformance.Step("assign-mode consumer reads exactly " + count
                        + " records, byte-exact, in order", this::consumeAll),
                new Conformance.Step("describeLogDirs: the partition in " + destDir + " only, not future",
                        this::describeLogDirsAfterMove),
                new Conformance.Step("alterReplicaLogDirs to " + destDir + " again: a no-op",
                        this::alterAgainIsNoOp));
    }

    // ------------------------------------------------------------------ topic, dirs before

    private void createOrUseTopic() throws Exception {
        NewTopic newTopic = new NewTopic(topic, Map.of(0, List.of(brokerId)))
                .configs(Map.of(TopicConfig.SEGMENT_BYTES_CONFIG, SEGMENT_BYTES));
        try {
            Conformance.await(admin.createTopics(List.of(newTopic)).all(), "createTopics " + topic);
        } catch (Conformance.CheckFailed failure) {
            if (!(failure.getCause() instanceof TopicExistsException)) {
                throw failure;
            }
            System.out.println("NOTE " + topic + " exists already; using it");
        }
        long deadline = System.nanoTime() + STATE_TIMEOUT.toNanos();
        while (true) {
            TopicDescription description = Conformance.await(admin.describeTopics(List.of(topic)).allTopicNames(),
                    "describeTopics " + topic).get(topic);
            List<TopicPartitionInfo> partitions = description.partitions();
            Conformance.checkEquals(1, partitions.size(), "partitions of " + topic);
            TopicPartitionInfo info = partitions.get(0);
            if (info.leader() != null) {
                Conformance.checkEquals(brokerId, info.leader().id(), "leader of " + tp);
                Conformance.checkEquals(1, info.replicas().size(), "replicas of " + tp);
                break;
            }
            Conformance.check(System.nanoTime() < deadline, "%s has no leader after %d s", tp,
                    STATE_TIMEOUT.toSeconds());
            Thread.sleep(100);
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps())) {
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(Set.of(tp), Duration.ofSeconds(30));
            Map<TopicPartition, Long> end = consumer.endOffsets(Set.of(tp), Duration.ofSeconds(30));
            Conformance.checkEquals(0L, begin.get(tp), "beginning offset of " + tp);
            Conformance.checkEquals(0L, end.get(tp), "end offset of " + tp + " (the topic must be empty)");
        }
    }

    private ReplicaLogDirInfo replicaLogDir() {
        Map<TopicPartitionReplica, ReplicaLogDirInfo> infos = Conformance.await(
                admin.describeReplicaLogDirs(List.of(replica)).all(), "describeReplicaLogDirs " + replica);
        ReplicaLogDirInfo info = infos.get(replica);
        Conformance.check(info != null, "no answer for %s: %s", replica, infos);
        return info;
    }

    private void describeBeforeMove() {
        ReplicaLogDirInfo info = replicaLogDir();
        System.out.println("BEFORE " + info);
        sourceDir = info.getCurrentReplicaLogDir();
        Conformance.check(sourceDir != null, "%s has no current log dir: %s", replica, info);
        Conformance.check(!sourceDir.equals(destDir), "%s already lives in %s (give the other log dir)", replica,
                destDir);
        Conformance.checkEquals(null, info.getFutureReplicaLogDir(), "future log dir of " + replica);
    }

    // ------------------------------------------------------------------ producer

    static byte[] value(int number) {
        byte[] value = new byte[RECORD_BYTES];
        byte[] prefix = String.format("%09d:", number).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(prefix, 0, value, 0, prefix.length);
        for (int i = prefix.length; i < value.length; i++) {
            value[i] = (byte) (number * 31 + i);
        }
        return value;
    }

    private static int number(byte[] value) {
        if (value == null || value.length < 10) {
            return -1;
        }
        try {
            return Integer.parseInt(new String(value, 0, 9, StandardCharsets.US_ASCII));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "conformance-log-dir-move-producer");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(128 * 1024));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }

    private void startProducer() throws Exception {
        producerThread = new Thread(this::produce, "numbered-producer");
        producerThread.setDaemon(true);
        producerThread.start();
        awaitAcked(count / 5);
    }

    private void produce() {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps())) {
            long started = System.nanoTime();
            for (int n = 0; n < count && !Thread.currentThread().isInterrupted(); n++) {
                if (n % 500 == 0) {
                    long due = started + n * 1_000_000_000L / RECORDS_PER_SECOND;
                    long early = due - System.nanoTime();
                    if (early > 0) {
                        Thread.sleep(early / 1_000_000, (int) (early % 1_000_000));
                    }
                }
                final int number = n;
                producer.send(new ProducerRecord<>(topic, 0, null, value(number)), (metadata, error) -> {
                    if (error != null) {
                        producerErrors.add("record " + number + ": " + Conformance.describe(error));
                    } else {
                        ackOffsets[number] = metadata.offset();
                        ackTimestamps[number] = metadata.timestamp();
                        acked.incrementAndGet();
                    }
                });
                sent.incrementAndGet();
            }
            producer.flush();
        } catch (Exception error) {
            producerErrors.add("producer: " + Conformance.describe(error));
        } finally {
            producerDoneNanos.set(System.nanoTime());
        }
    }

    private void awaitAcked(int wanted) throws InterruptedException {
        long deadline = System.nanoTime() + PRODUCE_TIMEOUT.toNanos();
        while (acked.get() < wanted) {
            Conformance.check(producerErrors.isEmpty(), "producer failed: %s", firstErrors());
            Conformance.check(producerThread.isAlive() || acked.get() >= wanted,
                    "producer stopped after %d acknowledgements", acked.get());
            Conformance.check(System.nanoTime() < deadline, "only %d of %d records acknowledged after %d s",
                    acked.get(), wanted, PRODUCE_TIMEOUT.toSeconds());
            Thread.sleep(10);
        }
    }

    private String firstErrors() {
        return producerErrors.stream().limit(3).toList().toString();
    }

    private void stopProducer() {
        if (producerThread != null && producerThread.isAlive()) {
            producerThread.interrupt();
            try {
                producerThread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ------------------------------------------------------------------ the move

    private void alterReplicaLogDir() {
        ackedAtAlter = acked.get();
        alterNanos = System.nanoTime();
        Conformance.await(admin.alterReplicaLogDirs(Map.of(replica, destDir)).values().get(replica),
                "alterReplicaLogDirs " + replica + " -> " + destDir);
        System.out.printf("ALTER sent with %d of %d records acknowledged%n", ackedAtAlter, count);
        Conformance.check(ackedAtAlter < count, "the producer was done before the move was asked for");
    }

    private void awaitMoved() throws Exception {
        long deadline = System.nanoTime() + MOVE_TIMEOUT.toNanos();
        boolean futureSeen = false;
        int polls = 0;
        String firstFuture = null;
        List<Long> lags = new ArrayList<>();
        ReplicaLogDirInfo info;
        while (true) {
            info = replicaLogDir();
            polls++;
            if (info.getFutureReplicaLogDir() != null) {
                Conformance.checkEquals(destDir, info.getFutureReplicaLogDir(), "future log dir while moving");
                Conformance.checkEquals(sourceDir, info.getCurrentReplicaLogDir(), "current log dir while moving");
                if (!futureSeen) {
                    firstFuture = info.toString();
                }
                futureSeen = true;
                lags.add(info.getFutureReplicaOffsetLag());
            } else if (destDir.equals(info.getCurrentReplicaLogDir())) {
                break;
            } else {
                Conformance.checkEquals(sourceDir, info.getCurrentReplicaLogDir(),
                        "current log dir before the future dir appears");
            }
            Conformance.check(System.nanoTime() < deadline, "not moved within %d s: %s", MOVE_TIMEOUT.toSeconds(),
                    info);
            Thread.sleep(50);
        }
        int ackedAtSwitch = acked.get();
        long doneNanos = producerDoneNanos.get();
        System.out.printf("MOVED %s -> %s in %d ms (%d describeReplicaLogDirs polls); future dir seen: %s%s;"
                        + " records acknowledged at the request %d, when the move was seen done %d of %d%n",
                sourceDir, destDir, (System.nanoTime() - alterNanos) / 1_000_000, polls, futureSeen,
                futureSeen ? " (first: " + firstFuture + ")" : "", ackedAtAlter, ackedAtSwitch, count);
        System.out.println("AFTER " + info);
        System.out.println("FUTURE_LAGS (offsets behind, per poll) " + lags);
        Conformance.check(doneNanos == 0 && ackedAtSwitch < count,
                "the producer finished before the move was seen done: the copy did not catch up with the"
                        + " producer (FUTURE_LAGS), so the moved log took no appends");
    }

    private void awaitProducer() throws Exception {
        long started = System.nanoTime();
        awaitAcked(count);
        producerThread.join(PRODUCE_TIMEOUT.toMillis());
        Conformance.check(!producerThread.isAlive(), "the producer thread did not finish");
        Conformance.check(producerErrors.isEmpty(), "producer failed: %s", firstErrors());
        Conformance.checkEquals(count, sent.get(), "records sent");
        Conformance.checkEquals(count, acked.get(), "records acknowledged");
        for (int n = 0; n < count; n++) {
            if (ackOffsets[n] != n) {
                throw new Conformance.CheckFailed("record " + n + " acknowledged at offset " + ackOffsets[n]);
            }
        }
        System.out.printf("PRODUCED %d records; the last %d ms after the move was seen done%n", count,
                (System.nanoTime() - started) / 1_000_000);
    }

    // ------------------------------------------------------------------ after the move

    private Properties consumerProps() {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "conformance-log-dir-move-consumer");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10000");
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(8 << 20));
        props.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(16 << 20));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return props;
    }

    private void consumeAll() {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps())) {
            consumer.assign(List.of(tp));
            Conformance.checkEquals(0L, consumer.beginningOffsets(Set.of(tp)).get(tp), "beginning offset");
            Conformance.checkEquals((long) count, consumer.endOffsets(Set.of(tp)).get(tp), "end offset");
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + CONSUME_TIMEOUT.toNanos();
            int next = 0;
            while (next < count) {
                Conformance.check(System.nanoTime() < deadline, "only %d of %d records read within %d s", next,
                        count, CONSUME_TIMEOUT.toSeconds());
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500)).records(tp)) {
                    Conformance.check(next < count, "record beyond %d: offset %d, number %d", count,
                            record.offset(), number(record.value()));
                    if (record.offset() != next || !Arrays.equals(value(next), record.value())
                            || record.key() != null || record.timestamp() != ackTimestamps[next]) {
                        throw new Conformance.CheckFailed(String.format(
                                "expected record %d at offset %d (CreateTime %d), got offset %d, number %d,"
                                        + " key %s, timestamp %d, value %s",
                                next, next, ackTimestamps[next], record.offset(), number(record.value()),
                                Conformance.hex(record.key()), record.timestamp(), Conformance.hex(record.value())));
                    }
                    next++;
                }
            }
            // Nothing beyond the last record.
            Conformance.checkEquals((long) count, consumer.position(tp), "position after the last record");
            Conformance.check(consumer.poll(Duration.ofMillis(300)).isEmpty(), "records beyond offset %d", count);
            System.out.printf("CONSUMED %d records, numbers 0..%d in order%n", next, count - 1);
        }
    }

    private void describeLogDirsAfterMove() {
        Map<Integer, Map<String, LogDirDescription>> all = Conformance.await(
                admin.describeLogDirs(List.of(brokerId)).allDescriptions(), "describeLogDirs");
        Map<String, LogDirDescription> dirs = all.get(brokerId);
        Conformance.check(dirs != null, "no answer for broker %d: %s", brokerId, all);
        Conformance.check(dirs.containsKey(destDir) && dirs.containsKey(sourceDir), "log dirs %s lack %s or %s",
                dirs.keySet(), sourceDir, destDir);
        Map<String, ReplicaInfo> holding = new TreeMap<>();
        for (Map.Entry<String, LogDirDescription> dir : dirs.entrySet()) {
            Conformance.check(dir.getValue().error() == null, "log dir %s has error %s", dir.getKey(),
                    dir.getValue().error());
            ReplicaInfo info = dir.getValue().replicaInfos().get(tp);
            if (info != null) {
                holding.put(dir.getKey(), info);
            }
        }
        System.out.println("LOG_DIRS " + holding);
        Conformance.checkEquals(Set.of(destDir), holding.keySet(), "log dirs holding " + tp);
        ReplicaInfo info = holding.get(destDir);
        Conformance.check(!info.isFuture() && info.offsetLag() == 0, "%s in %s: %s", tp, destDir, info);
        Conformance.check(info.size() >= (long) count * RECORD_BYTES, "%s in %s: size %d for %d records of %d bytes",
                tp, destDir, info.size(), count, RECORD_BYTES);
        ReplicaLogDirInfo replicaInfo = replicaLogDir();
        Conformance.checkEquals(destDir, replicaInfo.getCurrentReplicaLogDir(), "current log dir");
        Conformance.checkEquals(null, replicaInfo.getFutureReplicaLogDir(), "future log dir");
    }

    private void alterAgainIsNoOp() throws Exception {
        Conformance.await(admin.alterReplicaLogDirs(Map.of(replica, destDir)).values().get(replica),
                "alterReplicaLogDirs " + replica + " -> " + destDir + " again");
        Thread.sleep(200);
        ReplicaLogDirInfo info = replicaLogDir();
        Conformance.checkEquals(destDir, info.getCurrentReplicaLogDir(), "current log dir");
        Conformance.checkEquals(null, info.getFutureReplicaLogDir(), "future log dir");
    }
}
