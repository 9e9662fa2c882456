import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the Kafka AdminClient against a broker and checks Kafka's answers.
 *
 * Steps: describeCluster, createTopics (plus TopicExists, validateOnly, invalid name, invalid
 * partition count and replication factor), listTopics/describeTopics, a small produce, listOffsets
 * (earliest, latest, by timestamp, max timestamp), describeConfigs (topic and broker),
 * incrementalAlterConfigs (SET, APPEND, SUBTRACT, DELETE, validateOnly, invalid name/value),
 * deleteRecords and deleteTopics.
 *
 * usage: AdminCheck BOOTSTRAP TOPIC_PREFIX
 */
public final class AdminCheck {
    private static final String USAGE = "AdminCheck BOOTSTRAP TOPIC_PREFIX";
    private static final long BASE_TIMESTAMP = 1_700_000_000_000L;
    /** Timestamps of the records written to partition 0; index 6 holds the maximum on purpose. */
    private static final long[] TIMESTAMPS = {
        BASE_TIMESTAMP, BASE_TIMESTAMP + 1000, BASE_TIMESTAMP + 2000, BASE_TIMESTAMP + 3000, BASE_TIMESTAMP + 4000,
        BASE_TIMESTAMP + 5000, BASE_TIMESTAMP + 100_000, BASE_TIMESTAMP + 7000, BASE_TIMESTAMP + 8000,
        BASE_TIMESTAMP + 9000,
    };
    private static final int MAX_TIMESTAMP_OFFSET = 6;
    private static final String RETENTION_SET_AT_CREATE = "3600000";
    private static final String KAFKA_DEFAULT_RETENTION_MS = "604800000";

    private final String bootstrap;
    private final String topic;
    private final String defaultsTopic;
    private final Admin admin;
    private int brokerId = -1;
    private Uuid createdTopicId;

    private AdminCheck(String bootstrap, String prefix, Admin admin) {
        this.bootstrap = bootstrap;
        this.topic = prefix + "-admin";
        this.defaultsTopic = prefix + "-defaults";
        this.admin = admin;
    }

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String prefix = Conformance.arg(args, 1, USAGE);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-admin");
        // A loopback broker answers in milliseconds; short timeouts keep a broken API from stalling the run.
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "8000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        int status;
        try (Admin admin = Admin.create(props)) {
            AdminCheck checks = new AdminCheck(bootstrap, prefix, admin);
            status = Conformance.runSteps("AdminCheck", List.of(
                    new Conformance.Step("describeCluster", checks::describeCluster),
                    new Conformance.Step("createTopics", checks::createTopics),
                    new Conformance.Step("createTopics with broker defaults", checks::createTopicWithBrokerDefaults),
                    new Conformance.Step("createTopics errors", checks::createTopicsErrors),
                    new Conformance.Step("listTopics/describeTopics", checks::describeTopics),
                    new Conformance.Step("produce 10 records with chosen timestamps", checks::produceTimestamped),
                    new Conformance.Step("listOffsets earliest/latest", checks::listOffsetsEarliestLatest),
                    new Conformance.Step("listOffsets by timestamp", checks::listOffsetsByTimestamp),
                    new Conformance.Step("listOffsets max timestamp", checks::listOffsetsMaxTimestamp),
                    new Conformance.Step("describeConfigs topic", checks::describeTopicConfigs),
                    new Conformance.Step("describeConfigs broker", checks::describeBrokerConfigs),
                    new Conformance.Step("incrementalAlterConfigs", checks::incrementalAlterConfigs),
                    new Conformance.Step("incrementalAlterConfigs errors", checks::incrementalAlterConfigsErrors),
                    new Conformance.Step("deleteRecords", checks::deleteRecords),
                    new Conformance.Step("deleteTopics", checks::deleteTopics)));
        }
        System.exit(status);
    }

    private void describeCluster() {
        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = Conformance.await(cluster.nodes(), "describeCluster.nodes");
        Conformance.check(!nodes.isEmpty(), "describeCluster returned no nodes");
        String clusterId = Conformance.await(cluster.clusterId(), "describeCluster.clusterId");
        Conformance.check(clusterId != null && !clusterId.isEmpty(), "cluster id is empty: %s", clusterId);
        Node controller = Conformance.await(cluster.controller(), "describeCluster.controller");
        Conformance.check(controller != null && !controller.isEmpty(), "no controller reported");
        Conformance.check(nodes.stream().anyMatch(n -> n.id() == controller.id()),
                "controller %s is not among the nodes %s", controller, nodes);
        for (Node node : nodes) {
            Conformance.check(node.port() > 0 && !node.host().isEmpty(), "node without an address: %s", node);
        }
        brokerId = nodes.iterator().next().id();
    }

    private void createTopics() {
        NewTopic newTopic = new NewTopic(topic, 3, (short) 1)
                .configs(Map.of("retention.ms", RETENTION_SET_AT_CREATE));
        CreateTopicsResult result = admin.createTopics(List.of(newTopic));
        Conformance.await(result.all(), "createTopics(" + topic + ")");
        Conformance.checkEquals(3, Conformance.await(result.numPartitions(topic), "numPartitions"),
                "CreateTopics numPartitions");
        Conformance.checkEquals(1, Conformance.await(result.replicationFactor(topic), "replicationFactor"),
                "CreateTopics replicationFactor");
        createdTopicId = Conformance.await(result.topicId(topic), "CreateTopics topicId");
        Conformance.check(createdTopicId != null && !createdTopicId.equals(Uuid.ZERO_UUID),
                "CreateTopics returned a zero topic id");
        Config config = Conformance.await(result.config(topic), "CreateTopics config");
        ConfigEntry retention = config.get("retention.ms");
        Conformance.check(retention != null, "CreateTopics response has no retention.ms config");
        Conformance.checkEquals(RETENTION_SET_AT_CREATE, retention.value(), "CreateTopics retention.ms");
    }

    private void createTopicWithBrokerDefaults() {
        // No partition count or replication factor: the broker applies num.partitions and
        // default.replication.factor (checked against describeConfigs in the broker step).
        NewTopic withDefaults = new NewTopic(defaultsTopic, Optional.empty(), Optional.empty());
        CreateTopicsResult defaults = admin.createTopics(List.of(withDefaults));
        Conformance.await(defaults.all(), "createTopics(" + defaultsTopic + ") with broker defaults");
        int partitions = Conformance.await(defaults.numPartitions(defaultsTopic), "numPartitions");
        Conformance.check(partitions >= 1, "defaulted topic has %d partitions", partitions);
        Conformance.checkEquals(1, Conformance.await(defaults.replicationFactor(defaultsTopic), "replicationFactor"),
                "replication factor of a topic created without one");
    }

    private void createTopicsErrors() {
        Conformance.awaitFailure(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all(),
                TopicExistsException.class, "creating " + topic + " a second time");
        String validateOnlyTopic = topic + "-validate-only";
        Conformance.await(admin.createTopics(List.of(new NewTopic(validateOnlyTopic, 2, (short) 1)),
                new CreateTopicsOptions().validateOnly(true)).all(), "createTopics validateOnly");
        Set<String> names = Conformance.await(admin.listTopics().names(), "listTopics");
        Conformance.check(!names.contains(validateOnlyTopic), "validateOnly createTopics created %s",
                validateOnlyTopic);
        Conformance.awaitFailure(admin.createTopics(List.of(new NewTopic("bad topic name!", 1, (short) 1))).all(),
                InvalidTopicException.class, "creating a topic with an illegal name");
        Conformance.awaitFailure(admin.createTopics(List.of(new NewTopic(topic + "-zero", 0, (short) 1))).all(),
                InvalidPartitionsException.class, "creating a topic with 0 partitions");
        Conformance.awaitFailure(admin.createTopics(List.of(new NewTopic(topic + "-rf", 1, (short) 100))).all(),
                InvalidReplicationFactorException.class, "creating a topic with replication factor 100");
    }

    private void describeTopics() {
        Set<String> names = Conformance.await(admin.listTopics().names(), "listTopics");
        Conformance.check(names.contains(topic), "listTopics does not contain %s: %s", topic, names);
        Collection<Node> nodes = Conformance.await(admin.describeCluster().nodes(), "describeCluster.nodes");
        Map<String, TopicDescription> described =
                Conformance.await(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics");
        TopicDescription description = described.get(topic);
        Conformance.check(description != null, "describeTopics has no entry for %s", topic);
        Conformance.checkEquals(topic, description.name(), "TopicDescription.name");
        Conformance.check(!description.isInternal(), "%s described as internal", topic);
        Conformance.checkEquals(createdTopicId, description.topicId(), "topic id from describeTopics");
        List<TopicPartitionInfo> partitions = description.partitions();
        Conformance.checkEquals(3, partitions.size(), "described partition count");
        for (int p = 0; p < partitions.size(); p++) {
            TopicPartitionInfo info = partitions.get(p);
            Conformance.checkEquals(p, info.partition(), "partition id at position " + p);
            Conformance.check(info.leader() != null && nodes.stream().anyMatch(n -> n.id() == info.leader().id()),
                    "partition %d leader %s is not a cluster node", p, info.leader());
            Conformance.checkEquals(1, info.replicas().size(), "partition " + p + " replica count");
            Conformance.checkEquals(1, info.isr().size(), "partition " + p + " ISR size");
        }
        Conformance.awaitFailure(admin.describeTopics(List.of(topic + "-does-not-exist")).allTopicNames(),
                UnknownTopicOrPartitionException.class, "describeTopics of a missing topic");
    }

    private void produceTimestamped() throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "conformance-admin-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < TIMESTAMPS.length; i++) {
                // One record per batch: the checks below are about ListOffsets, not batching.
                long offset = producer.send(new ProducerRecord<>(topic, 0, TIMESTAMPS[i], null,
                        ("v" + i).getBytes())).get(30, java.util.concurrent.TimeUnit.SECONDS).offset();
                Conformance.checkEquals((long) i, offset, "offset of record " + i);
            }
        }
    }

    private ListOffsetsResultInfo listOffset(int partition, OffsetSpec spec, String what) {
        TopicPartition tp = new TopicPartition(topic, partition);
        return Conformance.await(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp), "listOffsets " + what);
    }

    private void listOffsetsEarliestLatest() {
        Conformance.checkEquals(0L, listOffset(0, OffsetSpec.earliest(), "earliest").offset(), "earliest offset p0");
        Conformance.checkEquals((long) TIMESTAMPS.length, listOffset(0, OffsetSpec.latest(), "latest").offset(),
                "latest offset p0");
        Conformance.checkEquals(0L, listOffset(1, OffsetSpec.earliest(), "earliest").offset(),
                "earliest offset of empty p1");
        Conformance.checkEquals(0L, listOffset(1, OffsetSpec.latest(), "latest").offset(),
                "latest offset of empty p1");
    }

    private void listOffsetsByTimestamp() {
        ListOffsetsResultInfo between = listOffset(0, OffsetSpec.forTimestamp(BASE_TIMESTAMP + 2500), "ts+2500");
        Conformance.checkEquals(3L, between.offset(), "first offset with timestamp >= base+2500");
        Conformance.checkEquals(BASE_TIMESTAMP + 3000, between.timestamp(), "timestamp found for base+2500");
        ListOffsetsResultInfo exact = listOffset(0, OffsetSpec.forTimestamp(BASE_TIMESTAMP), "ts=base");
        Conformance.checkEquals(0L, exact.offset(), "first offset with timestamp >= base");
        ListOffsetsResultInfo early = listOffset(0, OffsetSpec.forTimestamp(0), "ts=0");
        Conformance.checkEquals(0L, early.offset(), "first offset with timestamp >= 0");
        // Record 6 (base+100000) is the first with timestamp >= base+8500, not record 9.
        ListOffsetsResultInfo outOfOrder = listOffset(0, OffsetSpec.forTimestamp(BASE_TIMESTAMP + 8500), "ts+8500");
        Conformance.checkEquals(6L, outOfOrder.offset(), "first offset with timestamp >= base+8500");
        ListOffsetsResultInfo beyond = listOffset(0, OffsetSpec.forTimestamp(BASE_TIMESTAMP + 1_000_000), "beyond");
        Conformance.checkEquals(-1L, beyond.offset(), "offset for a timestamp after every record");
    }

    private void listOffsetsMaxTimestamp() {
        ListOffsetsResultInfo max = listOffset(0, OffsetSpec.maxTimestamp(), "maxTimestamp");
        Conformance.checkEquals((long) MAX_TIMESTAMP_OFFSET, max.offset(), "offset of the max timestamp");
        Conformance.checkEquals(TIMESTAMPS[MAX_TIMESTAMP_OFFSET], max.timestamp(), "max timestamp");
    }

    private Config describe(ConfigResource resource) {
        Map<ConfigResource, Config> configs =
                Conformance.await(admin.describeConfigs(List.of(resource)).all(), "describeConfigs " + resource);
        Config config = configs.get(resource);
        Conformance.check(config != null, "describeConfigs returned nothing for %s", resource);
        return config;
    }

    private static ConfigEntry entry(Config config, String name) {
        ConfigEntry entry = config.get(name);
        Conformance.check(entry != null, "config %s missing from describeConfigs", name);
        return entry;
    }

    private void describeTopicConfigs() {
        Config config = describe(new ConfigResource(ConfigResource.Type.TOPIC, topic));
        for (String name : List.of("cleanup.policy", "compression.type", "retention.ms", "retention.bytes",
                "segment.bytes", "segment.ms", "max.message.bytes", "min.insync.replicas",
                "message.timestamp.type", "delete.retention.ms", "unclean.leader.election.enable")) {
            entry(config, name);
        }
        ConfigEntry retention = entry(config, "retention.ms");
        Conformance.checkEquals(RETENTION_SET_AT_CREATE, retention.value(), "retention.ms value");
        Conformance.checkEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(),
                "retention.ms source");
        ConfigEntry cleanup = entry(config, "cleanup.policy");
        Conformance.checkEquals("delete", cleanup.value(), "cleanup.policy value");
        Conformance.check(cleanup.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "cleanup.policy was never set on the topic but has source %s", cleanup.source());
        Conformance.checkEquals("producer", entry(config, "compression.type").value(), "compression.type value");
        Conformance.checkEquals("CreateTime", entry(config, "message.timestamp.type").value(),
                "message.timestamp.type value");
        Conformance.awaitFailure(admin.describeConfigs(List.of(
                new ConfigResource(ConfigResource.Type.TOPIC, topic + "-does-not-exist"))).all(),
                UnknownTopicOrPartitionException.class, "describeConfigs of a missing topic");
    }

    private void describeBrokerConfigs() {
        Conformance.check(brokerId >= 0, "describeCluster did not give a broker id");
        Config config = describe(new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokerId)));
        for (String name : List.of("num.partitions", "default.replication.factor", "message.max.bytes",
                "auto.create.topics.enable", "log.retention.hours", "log.segment.bytes")) {
            entry(config, name);
        }
        String maxBytes = entry(config, "message.max.bytes").value();
        Conformance.check(maxBytes != null && Integer.parseInt(maxBytes) > 0, "message.max.bytes = %s", maxBytes);
        int numPartitions = Integer.parseInt(entry(config, "num.partitions").value());
        Map<String, TopicDescription> described = Conformance.await(
                admin.describeTopics(List.of(defaultsTopic)).allTopicNames(), "describeTopics " + defaultsTopic);
        Conformance.checkEquals(numPartitions, described.get(defaultsTopic).partitions().size(),
                "partitions of a topic created without a count (must equal broker num.partitions)");
    }

    private Map<ConfigResource, Collection<AlterConfigOp>> ops(AlterConfigOp... alterations) {
        Map<ConfigResource, Collection<AlterConfigOp>> request = new HashMap<>();
        request.put(new ConfigResource(ConfigResource.Type.TOPIC, topic), List.of(alterations));
        return request;
    }

    private static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    private void incrementalAlterConfigs() {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Conformance.await(admin.incrementalAlterConfigs(ops(
                op("retention.ms", "7200000", AlterConfigOp.OpType.SET),
                op("max.message.bytes", "2000000", AlterConfigOp.OpType.SET),
                op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND))).all(), "incrementalAlterConfigs SET/APPEND");
        Config config = describe(resource);
        Conformance.checkEquals("7200000", entry(config, "retention.ms").value(), "retention.ms after SET");
        Conformance.checkEquals("2000000", entry(config, "max.message.bytes").value(), "max.message.bytes after SET");
        Conformance.checkEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                entry(config, "max.message.bytes").source(), "max.message.bytes source after SET");
        Conformance.checkEquals("delete,compact", entry(config, "cleanup.policy").value(),
                "cleanup.policy after APPEND compact");

        Conformance.await(admin.incrementalAlterConfigs(ops(op("retention.ms", "1", AlterConfigOp.OpType.SET)),
                new AlterConfigsOptions().validateOnly(true)).all(), "incrementalAlterConfigs validateOnly");
        Conformance.checkEquals("7200000", entry(describe(resource), "retention.ms").value(),
                "retention.ms after a validateOnly SET (must be unchanged)");

        Conformance.await(admin.incrementalAlterConfigs(ops(
                op("retention.ms", null, AlterConfigOp.OpType.DELETE),
                op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT))).all(),
                "incrementalAlterConfigs DELETE/SUBTRACT");
        config = describe(resource);
        ConfigEntry retention = entry(config, "retention.ms");
        Conformance.checkEquals(KAFKA_DEFAULT_RETENTION_MS, retention.value(), "retention.ms after DELETE");
        Conformance.check(retention.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "retention.ms still a topic override after DELETE (source %s)", retention.source());
        Conformance.checkEquals("compact", entry(config, "cleanup.policy").value(),
                "cleanup.policy after SUBTRACT delete");
    }

    private void incrementalAlterConfigsErrors() {
        Conformance.awaitFailure(admin.incrementalAlterConfigs(ops(
                op("no.such.config", "1", AlterConfigOp.OpType.SET))).all(),
                InvalidConfigurationException.class, "SET of an unknown topic config");
        Conformance.awaitFailure(admin.incrementalAlterConfigs(ops(
                op("retention.ms", "not-a-number", AlterConfigOp.OpType.SET))).all(),
                InvalidConfigurationException.class, "SET retention.ms=not-a-number");
        Map<ConfigResource, Collection<AlterConfigOp>> missing = new HashMap<>();
        missing.put(new ConfigResource(ConfigResource.Type.TOPIC, topic + "-does-not-exist"),
                List.of(op("retention.ms", "1000", AlterConfigOp.OpType.SET)));
        Conformance.awaitFailure(admin.incrementalAlterConfigs(missing).all(),
                UnknownTopicOrPartitionException.class, "altering configs of a missing topic");
    }

    private void deleteRecords() {
        TopicPartition tp = new TopicPartition(topic, 0);
        long low = Conformance.await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks()
                .get(tp), "deleteRecords before 4").lowWatermark();
        Conformance.checkEquals(4L, low, "low watermark after deleteRecords(before 4)");
        Conformance.checkEquals(4L, listOffset(0, OffsetSpec.earliest(), "earliest").offset(),
                "earliest offset after deleteRecords");
        Conformance.checkEquals((long) TIMESTAMPS.length, listOffset(0, OffsetSpec.latest(), "latest").offset(),
                "latest offset after deleteRecords");
        Conformance.awaitFailure(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(TIMESTAMPS.length + 5)))
                .lowWatermarks().get(tp), OffsetOutOfRangeException.class, "deleteRecords beyond the high watermark");
        // -1 means "up to the high watermark".
        long all = Conformance.await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks()
                .get(tp), "deleteRecords before -1 (high watermark)").lowWatermark();
        Conformance.checkEquals((long) TIMESTAMPS.length, all, "low watermark after deleteRecords(before -1)");
    }

    private void deleteTopics() throws InterruptedException {
        Conformance.await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics(" + topic + ")");
        Conformance.await(admin.deleteTopics(List.of(defaultsTopic)).all(), "deleteTopics(" + defaultsTopic + ")");
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            Set<String> names = Conformance.await(admin.listTopics().names(), "listTopics");
            if (!names.contains(topic) && !names.contains(defaultsTopic)) {
                break;
            }
            Conformance.check(System.nanoTime() < deadline, "deleted topics still listed after 10 s: %s", names);
            Thread.sleep(200);
        }
        Conformance.awaitFailure(admin.deleteTopics(List.of(topic)).all(), UnknownTopicOrPartitionException.class,
                "deleting an already deleted topic");
    }
}
