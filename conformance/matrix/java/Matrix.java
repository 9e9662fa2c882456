import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The client matrix's scenario program for Apache Kafka's Java client, any version from 2.0 on.
 *
 * Usage: java Matrix BOOTSTRAP PREFIX. Prints one JSON object per scenario on stdout (the contract in
 * conformance/matrix/README.md); logs go to stderr. It compiles against every kafka-clients from 2.0.1
 * to 4.x: it calls only APIs present in 2.0 directly and reaches newer or removed ones (DescribeTopicsResult
 * allTopicNames/all, incrementalAlterConfigs/alterConfigs, close(Duration), KafkaShareConsumer) through reflection.
 */
public final class Matrix {
    static final long SCENARIO_TIMEOUT_MS = 20_000;
    static final int RECORDS = 100;

    static final java.util.concurrent.atomic.AtomicInteger CLIENTS = new java.util.concurrent.atomic.AtomicInteger();

    static String bootstrap;
    static String prefix;
    static int[] version;

    /** A scenario fills `observed`; it throws Unsupported, or any exception to fail. */
    interface Scenario {
        void run(Map<String, Object> observed, List<Object> closeables) throws Exception;
    }

    static final class Unsupported extends Exception {
        Unsupported(String message) { super(message); }
    }

    static final class CheckFailed extends Exception {
        CheckFailed(String message) { super(message); }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Matrix BOOTSTRAP PREFIX");
            System.exit(2);
        }
        bootstrap = args[0];
        prefix = args[1];
        String clientVersion = clientVersion();
        version = parseVersion(clientVersion);
        System.err.println("Matrix: kafka-clients " + clientVersion + " against " + bootstrap);

        Map<String, Scenario> scenarios = new LinkedHashMap<>();
        scenarios.put("metadata", Matrix::metadata);
        scenarios.put("create_delete_topic", Matrix::createDeleteTopic);
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            scenarios.put("produce_" + codec, (o, c) -> produce(codec, o, c));
        }
        scenarios.put("group_consume_commit", (o, c) -> groupConsumeCommit(false, o, c));
        scenarios.put("transactions", Matrix::transactions);
        scenarios.put("admin_describe_configs", Matrix::adminDescribeConfigs);
        scenarios.put("error_unknown_topic", Matrix::errorUnknownTopic);
        scenarios.put("error_fenced_producer", Matrix::errorFencedProducer);
        scenarios.put("error_not_authorized", Matrix::errorNotAuthorized);
        scenarios.put("group_consume_commit_kip848", (o, c) -> groupConsumeCommit(true, o, c));
        scenarios.put("share_consume", Matrix::shareConsume);
        scenarios.put("share_consume_explicit", Matrix::shareConsumeExplicit);

        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "matrix-scenario");
            t.setDaemon(true);
            return t;
        });
        for (Map.Entry<String, Scenario> entry : scenarios.entrySet()) {
            runOne(pool, entry.getKey(), entry.getValue());
        }
        System.out.flush();
        // A scenario that timed out may have left client threads behind; they must not keep the JVM.
        System.exit(0);
    }

    static void runOne(ExecutorService pool, String name, Scenario scenario) {
        Map<String, Object> observed = Collections.synchronizedMap(new TreeMap<>());
        List<Object> closeables = Collections.synchronizedList(new ArrayList<>());
        String status;
        String detail = "";
        long start = System.nanoTime();
        Future<?> future = pool.submit(() -> {
            try {
                scenario.run(observed, closeables);
            } finally {
                closeAll(closeables);
            }
            return null;
        });
        try {
            future.get(SCENARIO_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            status = "pass";
        } catch (TimeoutException e) {
            future.cancel(true);
            status = "fail";
            detail = "timeout: not finished within " + SCENARIO_TIMEOUT_MS / 1000 + " s";
        } catch (ExecutionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof Unsupported) {
                status = "unsupported";
                detail = cause.getMessage();
            } else {
                status = "fail";
                detail = describe(cause);
                if (!(cause instanceof CheckFailed)) {
                    cause.printStackTrace();
                }
            }
        } catch (InterruptedException e) {
            status = "fail";
            detail = "interrupted";
        }
        Map<String, Object> line = new TreeMap<>();
        line.put("scenario", name);
        line.put("status", status);
        synchronized (observed) {
            line.put("observed", new TreeMap<>(observed));
        }
        line.put("detail", detail);
        System.out.println(json(line));
        System.out.flush();
        System.err.printf("Matrix: %s %s in %d ms%n", name, status, (System.nanoTime() - start) / 1_000_000);
    }

    // ---------------------------------------------------------------------------------- scenarios

    static void metadata(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        Collection<Node> nodes = admin.describeCluster().nodes().get(10, TimeUnit.SECONDS);
        Node controller = admin.describeCluster().controller().get(10, TimeUnit.SECONDS);
        List<Integer> ids = new ArrayList<>();
        for (Node node : nodes) {
            ids.add(node.id());
        }
        Collections.sort(ids);
        observed.put("brokers", nodes.size());
        observed.put("node_ids", ids);
        observed.put("controller", controller != null && controller.id() >= 0);
        admin.listTopics().names().get(10, TimeUnit.SECONDS);
        check(nodes.size() >= 1, "no brokers in the cluster description");
    }

    static void createDeleteTopic(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        String topic = prefix + "-create-delete";
        admin.createTopics(Collections.singleton(new NewTopic(topic, 3, (short) 1))).all().get(10, TimeUnit.SECONDS);
        TopicDescription description = waitForTopic(admin, topic);
        observed.put("partitions", description.partitions().size());
        observed.put("listed", admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(topic));
        try {
            admin.createTopics(Collections.singleton(new NewTopic(topic, 3, (short) 1))).all().get(10, TimeUnit.SECONDS);
            observed.put("create_twice", "no error");
        } catch (ExecutionException e) {
            observed.put("create_twice", errorName(e));
        }
        admin.deleteTopics(Collections.singleton(topic)).all().get(10, TimeUnit.SECONDS);
        boolean gone = false;
        long deadline = System.currentTimeMillis() + 10_000;
        while (!gone && System.currentTimeMillis() < deadline) {
            gone = !admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(topic);
            if (!gone) {
                Thread.sleep(100);
            }
        }
        observed.put("gone_from_list", gone);
        try {
            allTopicNames(admin.describeTopics(Collections.singleton(topic))).get(10, TimeUnit.SECONDS);
            observed.put("describe_after_delete", "no error");
        } catch (ExecutionException e) {
            observed.put("describe_after_delete", errorName(e));
        }
        check(description.partitions().size() == 3, "expected 3 partitions");
        check("TopicExistsException".equals(observed.get("create_twice")), "second create did not fail with TopicExistsException");
        check(gone, "topic still listed 10 s after its deletion");
    }

    static void produce(String codec, Map<String, Object> observed, List<Object> closeables) throws Exception {
        if (codec.equals("zstd") && before(2, 1)) {
            throw new Unsupported("zstd needs kafka-clients >= 2.1 (KIP-110)");
        }
        AdminClient admin = admin(closeables);
        String topic = prefix + "-produce-" + codec;
        createTopic(admin, topic, 1);
        Properties props = producerProps();
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("compression.type", codec);
        props.put("linger.ms", "5");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            acks.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i + "-" + codec)));
        }
        producer.flush();
        long first = acks.get(0).get(10, TimeUnit.SECONDS).offset();
        long last = acks.get(RECORDS - 1).get(10, TimeUnit.SECONDS).offset();
        boolean contiguous = true;
        for (int i = 0; i < RECORDS; i++) {
            contiguous &= acks.get(i).get(10, TimeUnit.SECONDS).offset() == i;
        }
        observed.put("first_offset", first);
        observed.put("last_offset", last);
        observed.put("offsets_contiguous", contiguous);

        KafkaConsumer<String, String> consumer = track(closeables, new KafkaConsumer<>(consumerProps(null, "read_uncommitted"), new StringDeserializer(), new StringDeserializer()));
        TopicPartition tp = new TopicPartition(topic, 0);
        consumer.assign(Collections.singleton(tp));
        consumer.seekToBeginning(Collections.singleton(tp));
        List<ConsumerRecord<String, String>> records = pollUntil(consumer, RECORDS, 10_000);
        boolean roundTrip = records.size() == RECORDS;
        for (int i = 0; i < records.size(); i++) {
            ConsumerRecord<String, String> r = records.get(i);
            roundTrip &= r.offset() == i && ("key-" + i).equals(r.key()) && ("value-" + i + "-" + codec).equals(r.value());
        }
        observed.put("read_back", records.size());
        observed.put("round_trip", roundTrip);
        check(first == 0 && last == RECORDS - 1 && contiguous, "acked offsets are not 0.." + (RECORDS - 1));
        check(roundTrip, "records read back differ from those sent");
    }

    static void groupConsumeCommit(boolean kip848, Map<String, Object> observed, List<Object> closeables) throws Exception {
        if (kip848 && before(4, 0)) {
            throw new Unsupported("group.protocol=consumer (KIP-848) is GA in kafka-clients 4.0");
        }
        AdminClient admin = admin(closeables);
        String topic = prefix + (kip848 ? "-group848" : "-group");
        String group = prefix + (kip848 ? "-g848" : "-g");
        createTopic(admin, topic, 1);
        Properties props = producerProps();
        props.put("acks", "all");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        for (int i = 0; i < RECORDS; i++) {
            producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i));
        }
        producer.flush();

        KafkaConsumer<String, String> first = new KafkaConsumer<>(groupConsumerProps(group, kip848), new StringDeserializer(), new StringDeserializer());
        int firstRead;
        try {
            first.subscribe(Collections.singleton(topic));
            firstRead = pollUntil(first, RECORDS, 15_000).size();
            first.commitSync();
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        observed.put("first_consumer_read", firstRead);
        Map<TopicPartition, OffsetAndMetadata> committed =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        OffsetAndMetadata offset = committed.get(new TopicPartition(topic, 0));
        observed.put("committed", offset == null ? -1L : offset.offset());

        for (int i = RECORDS; i < RECORDS + 10; i++) {
            producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i));
        }
        producer.flush();
        KafkaConsumer<String, String> second = track(closeables, new KafkaConsumer<>(groupConsumerProps(group, kip848), new StringDeserializer(), new StringDeserializer()));
        second.subscribe(Collections.singleton(topic));
        List<ConsumerRecord<String, String>> rest = pollUntil(second, 10, 15_000);
        observed.put("second_consumer_read", rest.size());
        observed.put("second_consumer_first_offset", rest.isEmpty() ? -1L : rest.get(0).offset());
        check(firstRead == RECORDS, "first consumer read " + firstRead + " records, not " + RECORDS);
        check(offset != null && offset.offset() == RECORDS, "committed offset is " + observed.get("committed"));
        check(rest.size() == 10 && rest.get(0).offset() == RECORDS, "second consumer did not start at the committed offset");
    }

    static final int SHARE_RECORDS = 50;

    /**
     * KIP-932 share group, implicit acknowledgement: one KafkaShareConsumer reads all 50 records of a
     * 1-partition topic, commits, closes; a second one of the same group then gets nothing for 3 s, and
     * then the one record produced after that.
     */
    static void shareConsume(Map<String, Object> observed, List<Object> closeables) throws Exception {
        String topic = shareTopicWithRecords(closeables, "-share", prefix + "-share");
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        Object first = shareConsumer(prefix + "-share", null);
        try {
            invoke(first, "subscribe", Collections.singleton(topic));
            long deadline = System.currentTimeMillis() + 10_000;
            while (records.size() < SHARE_RECORDS && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : sharePoll(first, 200)) {
                    records.add(r);
                }
            }
            observed.put("commit_errors", commitErrors(invoke(first, "commitSync")));
        } finally {
            closeAll(Collections.singletonList(first));
        }
        List<Long> offsets = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) {
            offsets.add(r.offset());
        }
        Collections.sort(offsets);
        observed.put("records", records.size());
        observed.put("offsets_0_to_49", offsets.equals(range(0, SHARE_RECORDS)));

        Object second = track(closeables, shareConsumer(prefix + "-share", null));
        invoke(second, "subscribe", Collections.singleton(topic));
        int again = 0;
        long deadline = System.currentTimeMillis() + 3_000;
        while (System.currentTimeMillis() < deadline) {
            again += sharePoll(second, 200).count();
        }
        observed.put("redelivered_after_ack", again);
        // The second consumer is live: a record produced now comes to it (offset 50, first delivery).
        Properties props = producerProps();
        props.put("acks", "all");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        producer.send(new ProducerRecord<>(topic, "key-late", "value-late")).get(10, TimeUnit.SECONDS);
        List<Long> late = new ArrayList<>();
        deadline = System.currentTimeMillis() + 5_000;
        while (late.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : sharePoll(second, 200)) {
                late.add(r.offset());
            }
        }
        observed.put("second_consumer_new_records", late);
        check(records.size() == SHARE_RECORDS, "the share consumer got " + records.size() + " records, not " + SHARE_RECORDS);
        check(Integer.valueOf(0).equals(observed.get("commit_errors")), "commitSync reported errors: " + observed.get("commit_errors"));
        check(again == 0, "a second share consumer got " + again + " records that were acknowledged");
        check(late.equals(Collections.singletonList((long) SHARE_RECORDS)),
            "the second share consumer got offsets " + late + " after one more record was produced");
    }

    /**
     * KIP-932 share group, explicit acknowledgement: of 50 records, offsets 10-14 are rejected, 20-24
     * released (they come back with delivery count 2 and are then accepted), the rest accepted.
     */
    static void shareConsumeExplicit(Map<String, Object> observed, List<Object> closeables) throws Exception {
        String group = prefix + "-share-explicit";
        String topic = shareTopicWithRecords(closeables, "-share-explicit", group);
        Class<?> ackType = Class.forName("org.apache.kafka.clients.consumer.AcknowledgeType");
        Map<String, Integer> acks = new TreeMap<>();
        List<Long> redelivered = new ArrayList<>();
        List<Integer> redeliveredCounts = new ArrayList<>();
        List<Long> firstOffsets = new ArrayList<>();
        Object consumer = shareConsumer(group, "explicit");
        try {
            invoke(consumer, "subscribe", Collections.singleton(topic));
            long deadline = System.currentTimeMillis() + 12_000;
            while ((firstOffsets.size() < SHARE_RECORDS || redelivered.size() < 5) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : sharePoll(consumer, 200)) {
                    int count = deliveryCount(r);
                    String type;
                    if (count <= 1) {
                        firstOffsets.add(r.offset());
                        type = r.offset() >= 10 && r.offset() < 15 ? "REJECT" : r.offset() >= 20 && r.offset() < 25 ? "RELEASE" : "ACCEPT";
                    } else {
                        redelivered.add(r.offset());
                        redeliveredCounts.add(count);
                        type = "ACCEPT";
                    }
                    acks.merge(type.toLowerCase() + (count <= 1 ? "" : "_redelivered"), 1, Integer::sum);
                    @SuppressWarnings({"unchecked", "rawtypes"})
                    Object ack = Enum.valueOf((Class) ackType, type);
                    invoke(consumer, "acknowledge", r, ack);
                }
            }
            observed.put("commit_errors", commitErrors(invoke(consumer, "commitSync")));
        } finally {
            closeAll(Collections.singletonList(consumer));
        }
        Collections.sort(firstOffsets);
        Collections.sort(redelivered);
        observed.put("records", firstOffsets.size());
        observed.put("acknowledged", acks);
        observed.put("redelivered_offsets", redelivered);
        observed.put("redelivered_delivery_counts", new java.util.TreeSet<>(redeliveredCounts));
        check(firstOffsets.equals(range(0, SHARE_RECORDS)), "first deliveries were offsets " + firstOffsets);
        check(redelivered.equals(range(20, 25)), "redelivered offsets " + redelivered + ", not the released 20-24");
        check(redeliveredCounts.equals(Arrays.asList(2, 2, 2, 2, 2)), "redelivery counts " + redeliveredCounts);
        check(Integer.valueOf(0).equals(observed.get("commit_errors")), "commitSync reported errors: " + observed.get("commit_errors"));
    }

    /** A 1-partition topic PREFIX+suffix with 50 records, and `group`'s share.auto.offset.reset=earliest. */
    static String shareTopicWithRecords(List<Object> closeables, String suffix, String group) throws Exception {
        if (before(4, 2)) {
            throw new Unsupported("KafkaShareConsumer (KIP-932) GA in kafka-clients 4.2");
        }
        AdminClient admin = admin(closeables);
        String topic = prefix + suffix;
        createTopic(admin, topic, 1);
        // As kafka-configs.sh --entity-type groups does: IncrementalAlterConfigs on a GROUP resource (4.x).
        ConfigResource groupResource = new ConfigResource(ConfigResource.Type.valueOf("GROUP"), group);
        alterTopicConfig(admin, groupResource, "share.auto.offset.reset", "earliest");
        Properties props = producerProps();
        props.put("acks", "all");
        props.put("linger.ms", "5");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < SHARE_RECORDS; i++) {
            sent.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
        }
        producer.flush();
        for (Future<RecordMetadata> f : sent) {
            f.get(10, TimeUnit.SECONDS);
        }
        return topic;
    }

    /** A KafkaShareConsumer<String, String> of `group` (the class exists only in kafka-clients 4.x). */
    static Object shareConsumer(String group, String ackMode) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", clientId("share-consumer"));
        props.put("group.id", group);
        props.put("fetch.max.wait.ms", "100");
        props.put("request.timeout.ms", "10000");
        if (ackMode != null) {
            props.put("share.acknowledgement.mode", ackMode);
        }
        Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer");
        try {
            return cls.getConstructor(Properties.class, org.apache.kafka.common.serialization.Deserializer.class,
                                      org.apache.kafka.common.serialization.Deserializer.class)
                .newInstance(props, new StringDeserializer(), new StringDeserializer());
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof Exception ? (Exception) cause : e;
        }
    }

    @SuppressWarnings("unchecked")
    static ConsumerRecords<String, String> sharePoll(Object consumer, long millis) throws Exception {
        return (ConsumerRecords<String, String>) invoke(consumer, "poll", Duration.ofMillis(millis));
    }

    /** ConsumerRecord.deliveryCount() (4.x): Optional<Short>; 0 when absent. */
    static int deliveryCount(ConsumerRecord<String, String> record) throws Exception {
        Object count = ((java.util.Optional<?>) invoke(record, "deliveryCount")).orElse(null);
        return count == null ? 0 : ((Number) count).intValue();
    }

    /** How many partitions of commitSync()'s Map<TopicIdPartition, Optional<KafkaException>> carry an error. */
    static int commitErrors(Object result) {
        int errors = 0;
        for (Object value : ((Map<?, ?>) result).values()) {
            if (((java.util.Optional<?>) value).isPresent()) {
                System.err.println("Matrix: share commitSync error: " + describe((Throwable) ((java.util.Optional<?>) value).get()));
                errors++;
            }
        }
        return errors;
    }

    static List<Long> range(long from, long to) {
        List<Long> out = new ArrayList<>();
        for (long i = from; i < to; i++) {
            out.add(i);
        }
        return out;
    }

    static void transactions(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        String topic = prefix + "-txn";
        createTopic(admin, topic, 1);
        Properties props = producerProps();
        props.put("transactional.id", prefix + "-tx");
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < 10; i++) {
            producer.send(new ProducerRecord<>(topic, "committed-" + i, "c"));
        }
        producer.commitTransaction();
        producer.beginTransaction();
        for (int i = 0; i < 5; i++) {
            producer.send(new ProducerRecord<>(topic, "aborted-" + i, "a"));
        }
        producer.flush();
        producer.abortTransaction();

        TopicPartition tp = new TopicPartition(topic, 0);
        int[] committedCounts = readAll(closeables, tp, "read_committed");
        int[] uncommittedCounts = readAll(closeables, tp, "read_uncommitted");
        observed.put("read_committed_committed", committedCounts[0]);
        observed.put("read_committed_aborted", committedCounts[1]);
        observed.put("read_uncommitted_committed", uncommittedCounts[0]);
        observed.put("read_uncommitted_aborted", uncommittedCounts[1]);
        check(committedCounts[0] == 10 && committedCounts[1] == 0, "read_committed saw " + Arrays.toString(committedCounts));
    }

    /** {committed, aborted} record counts of a partition read from its start to its end offset. */
    static int[] readAll(List<Object> closeables, TopicPartition tp, String isolation) throws Exception {
        KafkaConsumer<String, String> consumer = track(closeables, new KafkaConsumer<>(consumerProps(null, isolation), new StringDeserializer(), new StringDeserializer()));
        consumer.assign(Collections.singleton(tp));
        consumer.seekToBeginning(Collections.singleton(tp));
        long end = consumer.endOffsets(Collections.singleton(tp)).get(tp);
        int[] counts = new int[2];
        long deadline = System.currentTimeMillis() + 10_000;
        while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                counts[r.key().startsWith("committed-") ? 0 : 1]++;
            }
        }
        return counts;
    }

    static void adminDescribeConfigs(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        String topic = prefix + "-configs";
        createTopic(admin, topic, 1);
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Map<ConfigResource, Config> configs =
            admin.describeConfigs(Arrays.asList(topicResource, brokerResource)).all().get(10, TimeUnit.SECONDS);
        ConfigEntry retention = configs.get(topicResource).get("retention.ms");
        ConfigEntry cleanup = configs.get(topicResource).get("cleanup.policy");
        ConfigEntry brokerCleanup = configs.get(brokerResource).get("log.cleanup.policy");
        observed.put("retention_ms_before", entryValue(retention));
        observed.put("retention_ms_source_before", entrySource(retention));
        observed.put("cleanup_policy", entryValue(cleanup));
        observed.put("cleanup_policy_source", entrySource(cleanup));
        observed.put("broker_log_cleanup_policy", entryValue(brokerCleanup));

        String api = alterTopicConfig(admin, topicResource, "retention.ms", "3600000");
        observed.put("alter_api", api);
        ConfigEntry after = null;
        long deadline = System.currentTimeMillis() + 10_000;
        while (System.currentTimeMillis() < deadline) {
            after = admin.describeConfigs(Collections.singleton(topicResource)).all().get(10, TimeUnit.SECONDS)
                .get(topicResource).get("retention.ms");
            if (after != null && "3600000".equals(after.value())) {
                break;
            }
            Thread.sleep(100);
        }
        observed.put("retention_ms_after", entryValue(after));
        observed.put("retention_ms_source_after", entrySource(after));
        check("3600000".equals(entryValue(after)), "retention.ms is " + entryValue(after) + " after the change");
        check("DYNAMIC_TOPIC_CONFIG".equals(entrySource(after)), "retention.ms source is " + entrySource(after));
    }

    static String alterTopicConfig(AdminClient admin, ConfigResource resource, String name, String value) throws Exception {
        if (hasMethod(admin.getClass(), "incrementalAlterConfigs")) {
            Class<?> opClass = Class.forName("org.apache.kafka.clients.admin.AlterConfigOp");
            Class<?> opType = Class.forName("org.apache.kafka.clients.admin.AlterConfigOp$OpType");
            @SuppressWarnings({"unchecked", "rawtypes"})
            Object set = Enum.valueOf((Class) opType, "SET");
            Object op = opClass.getConstructor(ConfigEntry.class, opType).newInstance(new ConfigEntry(name, value), set);
            Map<ConfigResource, Collection<Object>> ops = new HashMap<>();
            ops.put(resource, Collections.singletonList(op));
            Object result = invoke(admin, "incrementalAlterConfigs", ops);
            ((KafkaFuture<?>) invoke(result, "all")).get(10, TimeUnit.SECONDS);
            return "incrementalAlterConfigs";
        }
        Map<ConfigResource, Config> configs = new HashMap<>();
        configs.put(resource, new Config(Collections.singleton(new ConfigEntry(name, value))));
        Object result = invoke(admin, "alterConfigs", configs);
        ((KafkaFuture<?>) invoke(result, "all")).get(10, TimeUnit.SECONDS);
        return "alterConfigs";
    }

    static void errorUnknownTopic(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        String topic = prefix + "-missing";
        try {
            allTopicNames(admin.describeTopics(Collections.singleton(topic))).get(10, TimeUnit.SECONDS);
            observed.put("admin_describe", "no error");
        } catch (ExecutionException e) {
            observed.put("admin_describe", errorName(e));
        }
        Properties props = producerProps();
        props.put("max.block.ms", "2000");
        props.put("enable.idempotence", "false");
        props.put("acks", "1");
        KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        try {
            producer.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
            observed.put("produce", "no error");
        } catch (Exception e) {
            observed.put("produce", errorName(e));
        }
        check("UnknownTopicOrPartitionException".equals(observed.get("admin_describe")),
            "describing a missing topic gave " + observed.get("admin_describe"));
    }

    static void errorFencedProducer(Map<String, Object> observed, List<Object> closeables) throws Exception {
        AdminClient admin = admin(closeables);
        String topic = prefix + "-fenced";
        createTopic(admin, topic, 1);
        Properties props = producerProps();
        props.put("transactional.id", prefix + "-fenced-tx");
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("max.block.ms", "10000");
        KafkaProducer<String, String> first = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        first.initTransactions();
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, "k", "first")).get(10, TimeUnit.SECONDS);
        props.put("client.id", clientId("producer"));
        KafkaProducer<String, String> second = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
        second.initTransactions();
        try {
            first.commitTransaction();
            observed.put("commit_error", "no error");
        } catch (Exception e) {
            observed.put("commit_error", errorName(e));
            if (e.getCause() != null) {
                observed.put("commit_error_cause", errorName(e.getCause()));
            }
        }
        second.beginTransaction();
        second.send(new ProducerRecord<>(topic, "k", "second"));
        second.commitTransaction();
        check(!"no error".equals(observed.get("commit_error")), "the fenced producer's commit succeeded");
    }

    static void errorNotAuthorized(Map<String, Object> observed, List<Object> closeables) throws Exception {
        if (!"1".equals(System.getenv("MATRIX_AUTHORIZER"))) {
            throw new Unsupported("no authorizer");
        }
        AdminClient admin = admin(closeables);
        String topic = prefix + "-denied";
        createTopic(admin, topic, 1);
        AclBinding deny = new AclBinding(
            new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            new AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.DENY));
        admin.createAcls(Collections.singleton(deny)).all().get(10, TimeUnit.SECONDS);
        AclBindingFilter filter = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL), AccessControlEntryFilter.ANY);
        try {
            long deadline = System.currentTimeMillis() + 10_000;
            while (admin.describeAcls(filter).values().get(10, TimeUnit.SECONDS).isEmpty()
                   && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            Properties props = producerProps();
            props.put("max.block.ms", "5000");
            props.put("enable.idempotence", "false");
            props.put("acks", "1");
            KafkaProducer<String, String> producer = track(closeables, new KafkaProducer<>(props, new StringSerializer(), new StringSerializer()));
            try {
                producer.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
                observed.put("produce", "no error");
            } catch (Exception e) {
                observed.put("produce", errorName(e));
            }
            try {
                allTopicNames(admin.describeTopics(Collections.singleton(topic))).get(10, TimeUnit.SECONDS);
                observed.put("admin_describe", "no error");
            } catch (ExecutionException e) {
                observed.put("admin_describe", errorName(e));
            }
        } finally {
            admin.deleteAcls(Collections.singleton(filter)).all().get(10, TimeUnit.SECONDS);
        }
        check("TopicAuthorizationException".equals(observed.get("produce")),
            "producing to a denied topic gave " + observed.get("produce"));
    }

    // ------------------------------------------------------------------------------------ helpers

    static AdminClient admin(List<Object> closeables) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", "10000");
        props.put("client.id", clientId("admin"));
        return track(closeables, AdminClient.create(props));
    }

    /** A client.id unique in this JVM (a repeated one makes the client log an mbean warning). */
    static String clientId(String kind) {
        return prefix + "-" + kind + "-" + CLIENTS.incrementAndGet();
    }

    static Properties producerProps() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", clientId("producer"));
        props.put("max.block.ms", "15000");
        props.put("request.timeout.ms", "10000");
        return props;
    }

    static Properties consumerProps(String group, String isolation) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", clientId("consumer"));
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("isolation.level", isolation);
        props.put("fetch.max.wait.ms", "100");
        props.put("request.timeout.ms", "10000");
        if (group != null) {
            props.put("group.id", group);
        }
        return props;
    }

    static Properties groupConsumerProps(String group, boolean kip848) {
        Properties props = consumerProps(group, "read_uncommitted");
        if (kip848) {
            props.put("group.protocol", "consumer");
        } else {
            props.put("session.timeout.ms", "10000");
            props.put("heartbeat.interval.ms", "1000");
        }
        return props;
    }

    static void createTopic(AdminClient admin, String topic, int partitions) throws Exception {
        admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1))).all().get(10, TimeUnit.SECONDS);
        waitForTopic(admin, topic);
    }

    static TopicDescription waitForTopic(AdminClient admin, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (true) {
            try {
                return allTopicNames(admin.describeTopics(Collections.singleton(topic))).get(10, TimeUnit.SECONDS).get(topic);
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    /** DescribeTopicsResult.allTopicNames() (3.1+) or all() (removed in 4.0). */
    @SuppressWarnings("unchecked")
    static KafkaFuture<Map<String, TopicDescription>> allTopicNames(Object result) throws Exception {
        String method = hasMethod(result.getClass(), "allTopicNames") ? "allTopicNames" : "all";
        return (KafkaFuture<Map<String, TopicDescription>>) invoke(result, method);
    }

    static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> consumer, int count, long timeoutMs) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (records.size() < count && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
            for (ConsumerRecord<String, String> r : batch) {
                records.add(r);
            }
        }
        return records;
    }

    static String entryValue(ConfigEntry entry) {
        return entry == null ? null : entry.value();
    }

    static String entrySource(ConfigEntry entry) {
        return entry == null || entry.source() == null ? null : entry.source().name();
    }

    static void check(boolean condition, String message) throws CheckFailed {
        if (!condition) {
            throw new CheckFailed(message);
        }
    }

    static boolean before(int major, int minor) {
        return version[0] < major || (version[0] == major && version[1] < minor);
    }

    /** The kafka-clients version from its jar (AppInfoParser moved to an internal package in 4.x). */
    static String clientVersion() throws java.io.IOException {
        Properties props = new Properties();
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                props.load(in);
            }
        }
        return props.getProperty("version", "0.0.0");
    }

    static int[] parseVersion(String text) {
        String[] parts = text.split("[.-]");
        int[] out = new int[] {0, 0};
        for (int i = 0; i < 2 && i < parts.length; i++) {
            try {
                out[i] = Integer.parseInt(parts[i]);
            } catch (NumberFormatException ignored) {
                // a qualifier such as "SNAPSHOT"; keep 0
            }
        }
        return out;
    }

    static <T> T track(List<Object> closeables, T closeable) {
        closeables.add(closeable);
        return closeable;
    }

    static void closeAll(List<Object> closeables) {
        List<Object> copy;
        synchronized (closeables) {
            copy = new ArrayList<>(closeables);
        }
        Collections.reverse(copy);
        for (Object o : copy) {
            try {
                if (hasMethod(o.getClass(), "close", Duration.class)) {
                    o.getClass().getMethod("close", Duration.class).invoke(o, Duration.ofSeconds(5));
                } else if (hasMethod(o.getClass(), "close", long.class, TimeUnit.class)) {
                    o.getClass().getMethod("close", long.class, TimeUnit.class).invoke(o, 5L, TimeUnit.SECONDS);
                } else {
                    o.getClass().getMethod("close").invoke(o);
                }
            } catch (Exception e) {
                System.err.println("Matrix: closing " + o.getClass().getSimpleName() + " failed: " + describe(unwrap(e)));
            }
        }
    }

    static boolean hasMethod(Class<?> cls, String name, Class<?>... types) {
        if (types.length > 0) {
            try {
                cls.getMethod(name, types);
                return true;
            } catch (NoSuchMethodException e) {
                return false;
            }
        }
        for (Method m : cls.getMethods()) {
            if (m.getName().equals(name)) {
                return true;
            }
        }
        return false;
    }

    /** Calls the public method `name` whose parameter count is args.length (the first that accepts them). */
    static Object invoke(Object target, String name, Object... args) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (!m.getName().equals(name) || m.getParameterCount() != args.length) {
                continue;
            }
            Class<?>[] types = m.getParameterTypes();
            boolean fits = true;
            for (int i = 0; i < args.length; i++) {
                fits &= args[i] == null || types[i].isInstance(args[i]);
            }
            if (fits) {
                m.setAccessible(true);
                try {
                    return m.invoke(target, args);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    throw cause instanceof Exception ? (Exception) cause : e;
                }
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + name + "/" + args.length);
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException
                || t instanceof InvocationTargetException || t instanceof UndeclaredThrowableException)
               && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static String errorName(Throwable t) {
        return unwrap(t).getClass().getSimpleName();
    }

    static String describe(Throwable t) {
        String message = t.getMessage();
        return t.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }

    // ----------------------------------------------------------------------------------- JSON out

    static String json(Object value) {
        StringBuilder out = new StringBuilder();
        writeJson(out, value);
        return out.toString();
    }

    static void writeJson(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            out.append(value);
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                quote(out, String.valueOf(e.getKey()));
                out.append(": ");
                writeJson(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                writeJson(out, item);
            }
            out.append(']');
        } else {
            quote(out, String.valueOf(value));
        }
    }

    static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
