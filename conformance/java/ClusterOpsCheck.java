import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.LogDirNotFoundException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.PreferredLeaderNotAvailableException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Cluster operations through the AdminClient calls behind Kafka's CLI tools kafka-reassign-partitions,
 * kafka-leader-election and kafka-log-dirs, against a cluster of brokers 1, 2 and 3. One mode per run:
 *
 * <ul>
 * <li>reassign BOOTSTRAP TOPIC: a topic with partitions 0 and 1 on broker 1 only gets 20000 records of
 *     1 KiB, moves to brokers [2, 3] (alterPartitionReassignments; listPartitionReassignments shows it,
 *     then nothing; leader 2, ISR {2, 3}; every record read back in order), partition 0's replication
 *     factor goes up to [2, 3, 1] and down to [3] (leader 3, records intact); then Kafka's errors for a
 *     cancel with nothing running, an unknown broker, a duplicate replica and an unknown partition,
 *     which change nothing.</li>
 * <li>create BOOTSTRAP TOPIC PARTITIONS: a replication-factor-3 topic with a full ISR (for the elect
 *     modes; the test moves leaders between runs).</li>
 * <li>elect BOOTSTRAP TOPIC: some leaders are away from the preferred (first) replica; electLeaders
 *     PREFERRED elects those and answers ElectionNotNeeded for the rest, leaders are the first replicas,
 *     a second election is not needed anywhere, an all-partitions election leaves the topic out, an
 *     unknown partition is UnknownTopicOrPartition.</li>
 * <li>elect-unavailable BOOTSTRAP TOPIC PARTITION: the partition's preferred replica is down; electLeaders
 *     PREFERRED answers PreferredLeaderNotAvailable and changes nothing.</li>
 * <li>logdirs BOOTSTRAP TOPIC LOG_DIRS (LOG_DIRS: 1=/dir,2=/dir,3=/dir, each broker's log.dirs):
 *     describeLogDirs shows one log dir per broker listing exactly the topic's replicas on it;
 *     describeReplicaLogDirs gives each replica's dir; alterReplicaLogDirs to a directory that is not a
 *     log dir is LogDirNotFound.</li>
 * </ul>
 */
public final class ClusterOpsCheck {
    private static final String USAGE = "ClusterOpsCheck reassign BOOTSTRAP TOPIC"
            + " | create BOOTSTRAP TOPIC PARTITIONS | elect BOOTSTRAP TOPIC"
            + " | elect-unavailable BOOTSTRAP TOPIC PARTITION | logdirs BOOTSTRAP TOPIC LOG_DIRS";
    private static final int MOVED_PARTITIONS = 2;
    private static final int RECORDS_PER_PARTITION = 10_000;
    private static final int RECORD_BYTES = 1024;
    private static final int LOG_DIR_RECORDS_PER_PARTITION = 100;
    /** Partition -> replicas of the logdirs topic: every broker holds two of the three partitions. */
    private static final Map<Integer, List<Integer>> LOG_DIR_ASSIGNMENT =
            Map.of(0, List.of(1, 2), 1, List.of(2, 3), 2, List.of(3, 1));
    private static final Duration MOVE_TIMEOUT = Duration.ofSeconds(120);
    private static final Duration STATE_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(90);

    private final String bootstrap;
    private final String topic;
    private final Admin admin;
    private String beforeBadRequests = "";
    private final Set<TopicPartition> awayFromPreferred = new HashSet<>();
    private String beforeUnavailableElection = "";

    private ClusterOpsCheck(String bootstrap, String topic, Admin admin) {
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.admin = admin;
    }

    public static void main(String[] args) {
        String mode = Conformance.arg(args, 0, USAGE);
        String bootstrap = Conformance.arg(args, 1, USAGE);
        String topic = Conformance.arg(args, 2, USAGE);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-cluster-ops");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        int status;
        try (Admin admin = Admin.create(props)) {
            ClusterOpsCheck checks = new ClusterOpsCheck(bootstrap, topic, admin);
            List<Conformance.Step> steps = switch (mode) {
                case "reassign" -> checks.reassignSteps();
                case "create" -> List.of(new Conformance.Step("createTopics " + topic + " with replication factor 3",
                        () -> checks.createReplicated(Integer.parseInt(Conformance.arg(args, 3, USAGE)))));
                case "elect" -> checks.electSteps();
                case "elect-unavailable" -> checks.electUnavailableSteps(
                        Integer.parseInt(Conformance.arg(args, 3, USAGE)));
                case "logdirs" -> checks.logDirSteps(parseLogDirs(Conformance.arg(args, 3, USAGE)));
                default -> {
                    System.err.println("unknown mode " + mode + "; usage: " + USAGE);
                    System.exit(2);
                    yield List.of();
                }
            };
            status = Conformance.runSteps("ClusterOpsCheck " + mode, steps);
        }
        System.exit(status);
    }

    // ------------------------------------------------------------------ reassign

    private List<Conformance.Step> reassignSteps() {
        int total = MOVED_PARTITIONS * RECORDS_PER_PARTITION;
        return List.of(
                new Conformance.Step("createTopics " + topic + ": partitions 0 and 1 on broker 1 only",
                        this::createOnBrokerOne),
                new Conformance.Step("default producer (acks=all) writes " + total + " records of 1 KiB",
                        this::produceLargeRecords),
                new Conformance.Step("alterPartitionReassignments: both partitions to [2, 3]",
                        () -> reassign(Map.of(0, List.of(2, 3), 1, List.of(2, 3)))),
                new Conformance.Step("listPartitionReassignments shows the move while it runs, then nothing",
                        this::awaitMoveListedThenDone),
                new Conformance.Step("describeTopics: replicas [2, 3], ISR {2, 3}, leader 2",
                        this::awaitMovedState),
                new Conformance.Step("assign-mode consumer reads all " + total + " records in order",
                        () -> consumeLargeRecords(List.of(0, 1))),
                new Conformance.Step("replication factor up: partition 0 to [2, 3, 1], ISR of 3, leader 2",
                        this::raiseReplicationFactor),
                new Conformance.Step("replication factor down: partition 0 to [3], leader 3",
                        this::lowerReplicationFactor),
                new Conformance.Step("partition 0 still holds its " + RECORDS_PER_PARTITION + " records, in order",
                        () -> consumeLargeRecords(List.of(0))),
                new Conformance.Step("cancel with nothing in progress: NoReassignmentInProgressException",
                        this::cancelWithNothingRunning),
                new Conformance.Step("a reassignment to broker 7: InvalidReplicaAssignmentException",
                        () -> Conformance.awaitFailure(alter(1, Optional.of(List.of(2, 7))),
                                InvalidReplicaAssignmentException.class, "reassign partition 1 to [2, 7]")),
                new Conformance.Step("a duplicate replica [2, 2]: InvalidReplicaAssignmentException",
                        () -> Conformance.awaitFailure(alter(1, Optional.of(List.of(2, 2))),
                                InvalidReplicaAssignmentException.class, "reassign partition 1 to [2, 2]")),
                new Conformance.Step("partition 9 and a missing topic: UnknownTopicOrPartitionException",
                        this::reassignUnknownPartitions),
                new Conformance.Step("after the bad requests: describeTopics unchanged, nothing in progress",
                        this::checkUnchangedByBadRequests));
    }

    private void createOnBrokerOne() throws Exception {
        // The cluster's min.insync.replicas (2) cannot be met by one replica; acks=all needs 1 here.
        NewTopic newTopic = new NewTopic(topic, Map.of(0, List.of(1), 1, List.of(1)))
                .configs(Map.of("min.insync.replicas", "1"));
        Conformance.await(admin.createTopics(List.of(newTopic)).all(), "createTopics");
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.size() == MOVED_PARTITIONS
                && s.values().stream().allMatch(i -> leaderId(i) == 1 && ids(i.replicas()).equals(List.of(1))),
                "both partitions on broker 1, led by it", STATE_TIMEOUT);
        System.out.println("CREATED" + text(state));
    }

    private static byte[] largeValue(int partition, int seq) {
        byte[] value = new byte[RECORD_BYTES];
        byte[] head = String.format("p%d-%06d-", partition, seq).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(head, 0, value, 0, head.length);
        for (int i = head.length; i < RECORD_BYTES; i++) {
            value[i] = (byte) ('a' + (seq + i) % 26);
        }
        return value;
    }

    private void produceLargeRecords() throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps("conformance-ops-producer"))) {
            for (int seq = 0; seq < RECORDS_PER_PARTITION; seq++) {
                for (int partition = 0; partition < MOVED_PARTITIONS; partition++) {
                    acks.add(producer.send(new ProducerRecord<>(topic, partition, null, largeValue(partition, seq))));
                }
            }
            producer.flush();
            checkContiguous(acks);
        }
    }

    private Properties producerProps(String clientId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }

    /** Every acknowledgement arrived, and each partition's offsets run 0, 1, 2, ... in send order. */
    private static void checkContiguous(List<Future<RecordMetadata>> acks) throws Exception {
        Map<Integer, Long> next = new HashMap<>();
        for (Future<RecordMetadata> ack : acks) {
            RecordMetadata meta = ack.get(Conformance.CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            long expected = next.getOrDefault(meta.partition(), 0L);
            Conformance.checkEquals(expected, meta.offset(), "offset in partition " + meta.partition());
            next.put(meta.partition(), expected + 1);
        }
    }

    private void consumeLargeRecords(List<Integer> partitions) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "conformance-ops-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> assignment = partitions.stream().map(p -> new TopicPartition(topic, p)).toList();
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            Map<TopicPartition, Long> ends = consumer.endOffsets(assignment, Conformance.CALL_TIMEOUT);
            for (TopicPartition tp : assignment) {
                Conformance.checkEquals((long) RECORDS_PER_PARTITION, ends.get(tp), "end offset of " + tp);
            }
            Map<Integer, Integer> seen = new HashMap<>();
            int total = 0;
            int wanted = partitions.size() * RECORDS_PER_PARTITION;
            long deadline = System.nanoTime() + CONSUME_TIMEOUT.toNanos();
            while (total < wanted && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    int seq = seen.getOrDefault(record.partition(), 0);
                    Conformance.checkEquals((long) seq, record.offset(), "offset of record " + seq
                            + " in partition " + record.partition());
                    byte[] expected = largeValue(record.partition(), seq);
                    Conformance.check(Arrays.equals(expected, record.value()),
                            "record %d of partition %d: expected %s but got %s", record.offset(), record.partition(),
                            Conformance.hex(expected), Conformance.hex(record.value()));
                    seen.put(record.partition(), seq + 1);
                    total++;
                }
            }
            Conformance.checkEquals(wanted, total, "records read within " + CONSUME_TIMEOUT.toSeconds() + " s");
        }
    }

    /** One partition's alterPartitionReassignments result; an empty target cancels. */
    private KafkaFuture<Void> alter(int partition, Optional<List<Integer>> target) {
        TopicPartition tp = new TopicPartition(topic, partition);
        return admin.alterPartitionReassignments(Map.of(tp, target.map(NewPartitionReassignment::new)))
                .values().get(tp);
    }

    private void reassign(Map<Integer, List<Integer>> targets) {
        Map<TopicPartition, Optional<NewPartitionReassignment>> request = new HashMap<>();
        targets.forEach((p, replicas) -> request.put(new TopicPartition(topic, p),
                Optional.of(new NewPartitionReassignment(replicas))));
        Conformance.await(admin.alterPartitionReassignments(request).all(), "alterPartitionReassignments " + targets);
    }

    /**
     * Poll listPartitionReassignments (all partitions, or just {@code partitions}) until none of this
     * topic's is in progress; returns the first non-empty answer seen (empty if the move was done first).
     */
    private Map<TopicPartition, PartitionReassignment> awaitReassignmentsDone(Set<TopicPartition> partitions)
            throws InterruptedException {
        Map<TopicPartition, PartitionReassignment> firstSeen = Map.of();
        long started = System.nanoTime();
        long deadline = started + MOVE_TIMEOUT.toNanos();
        while (true) {
            Map<TopicPartition, PartitionReassignment> ongoing = new TreeMap<>(
                    (a, b) -> Integer.compare(a.partition(), b.partition()));
            Map<TopicPartition, PartitionReassignment> listed = Conformance.await(partitions == null
                    ? admin.listPartitionReassignments().reassignments()
                    : admin.listPartitionReassignments(partitions).reassignments(), "listPartitionReassignments");
            listed.forEach((tp, entry) -> {
                if (tp.topic().equals(topic)) {
                    ongoing.put(tp, entry);
                }
            });
            if (ongoing.isEmpty()) {
                System.out.printf("REASSIGNMENT done after %d ms; seen in progress: %s%n",
                        (System.nanoTime() - started) / 1_000_000, firstSeen.isEmpty() ? "no" : firstSeen);
                return firstSeen;
            }
            if (firstSeen.isEmpty()) {
                firstSeen = ongoing;
            }
            if (System.nanoTime() > deadline) {
                throw new Conformance.CheckFailed("reassignment still in progress after "
                        + MOVE_TIMEOUT.toSeconds() + " s: " + ongoing + "; describeTopics:" + text(describe()));
            }
            Thread.sleep(100);
        }
    }

    private void awaitMoveListedThenDone() throws Exception {
        Map<TopicPartition, PartitionReassignment> seen = awaitReassignmentsDone(null);
        if (seen.isEmpty()) {
            System.out.println("NOTE the move finished before the first listPartitionReassignments answered");
        }
        // Kafka lists the full replica set while moving: the target, then the original replicas.
        for (Map.Entry<TopicPartition, PartitionReassignment> entry : seen.entrySet()) {
            PartitionReassignment r = entry.getValue();
            Conformance.checkEquals(List.of(2, 3, 1), r.replicas(), entry.getKey() + " replicas while moving");
            Conformance.checkEquals(List.of(2, 3), r.addingReplicas(), entry.getKey() + " adding replicas");
            Conformance.checkEquals(List.of(1), r.removingReplicas(), entry.getKey() + " removing replicas");
        }
    }

    private void awaitMovedState() throws Exception {
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.size() == MOVED_PARTITIONS
                && s.values().stream().allMatch(i -> ids(i.replicas()).equals(List.of(2, 3))
                        && sortedIds(i.isr()).equals(List.of(2, 3))),
                "replicas [2, 3] with ISR {2, 3}", STATE_TIMEOUT);
        for (TopicPartitionInfo info : state.values()) {
            Conformance.checkEquals(2, leaderId(info), "leader of partition " + info.partition());
        }
        System.out.println("MOVED" + text(state));
    }

    private void raiseReplicationFactor() throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        reassign(Map.of(0, List.of(2, 3, 1)));
        awaitReassignmentsDone(Set.of(p0));
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.containsKey(0)
                && ids(s.get(0).replicas()).equals(List.of(2, 3, 1)) && s.get(0).isr().size() == 3,
                "partition 0 on [2, 3, 1] with an ISR of 3", STATE_TIMEOUT);
        Conformance.checkEquals(2, leaderId(state.get(0)), "leader of partition 0");
        System.out.println("RAISED" + text(state));
    }

    private void lowerReplicationFactor() throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        reassign(Map.of(0, List.of(3)));
        awaitReassignmentsDone(Set.of(p0));
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.containsKey(0)
                && ids(s.get(0).replicas()).equals(List.of(3)), "partition 0 on [3]", STATE_TIMEOUT);
        Conformance.checkEquals(3, leaderId(state.get(0)), "leader of partition 0");
        Conformance.checkEquals(List.of(3), ids(state.get(0).isr()), "ISR of partition 0");
        System.out.println("LOWERED" + text(state));
    }

    private void cancelWithNothingRunning() {
        beforeBadRequests = text(describe());
        Conformance.awaitFailure(alter(1, Optional.empty()), NoReassignmentInProgressException.class,
                "cancel partition 1's reassignment");
    }

    private void reassignUnknownPartitions() {
        Conformance.awaitFailure(alter(9, Optional.of(List.of(2, 3))), UnknownTopicOrPartitionException.class,
                "reassign partition 9");
        TopicPartition missing = new TopicPartition(topic + "-missing", 0);
        Conformance.awaitFailure(admin.alterPartitionReassignments(Map.of(missing,
                Optional.of(new NewPartitionReassignment(List.of(2, 3))))).values().get(missing),
                UnknownTopicOrPartitionException.class, "reassign " + missing);
    }

    private void checkUnchangedByBadRequests() throws Exception {
        Thread.sleep(500);  // time for a change the controller should not have made to reach the brokers
        Conformance.checkEquals(beforeBadRequests, text(describe()), "describeTopics after the bad requests");
        Map<TopicPartition, PartitionReassignment> listed = Conformance.await(
                admin.listPartitionReassignments().reassignments(), "listPartitionReassignments");
        Conformance.check(listed.keySet().stream().noneMatch(tp -> tp.topic().equals(topic)),
                "reassignments in progress after the bad requests: %s", listed);
    }

    // ------------------------------------------------------------------ create, elect

    private void createReplicated(int partitions) throws Exception {
        Conformance.await(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all(),
                "createTopics");
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.size() == partitions
                && s.values().stream().allMatch(i -> i.leader() != null && i.isr().size() == 3),
                "every partition with a leader and an ISR of 3", STATE_TIMEOUT);
        System.out.println("CREATED" + text(state));
    }

    private List<Conformance.Step> electSteps() {
        return List.of(
                new Conformance.Step("describeTopics: ISR of 3, some leaders away from the preferred replica",
                        this::findLeadersAwayFromPreferred),
                new Conformance.Step("electLeaders PREFERRED: those elected, ElectionNotNeededException for the rest",
                        this::electPreferred),
                new Conformance.Step("describeTopics: every leader is the first replica, ISR of 3",
                        () -> System.out.println("ELECTED" + text(awaitState(s -> s.values().stream().allMatch(
                                i -> leaderId(i) == ids(i.replicas()).get(0) && i.isr().size() == 3),
                                "leaders on the first replicas", STATE_TIMEOUT)))),
                new Conformance.Step("electLeaders PREFERRED again: ElectionNotNeededException everywhere",
                        this::electPreferredAgain),
                new Conformance.Step("electLeaders PREFERRED on all partitions (null): " + topic + " left out",
                        this::electPreferredEverywhere),
                new Conformance.Step("electLeaders for partition 99: UnknownTopicOrPartitionException",
                        this::electUnknownPartition));
    }

    private void findLeadersAwayFromPreferred() throws Exception {
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> !s.isEmpty()
                && s.values().stream().allMatch(i -> i.leader() != null && i.isr().size() == 3),
                "an ISR of 3 everywhere", STATE_TIMEOUT);
        for (TopicPartitionInfo info : state.values()) {
            if (leaderId(info) != ids(info.replicas()).get(0)) {
                awayFromPreferred.add(new TopicPartition(topic, info.partition()));
            }
        }
        System.out.println("BEFORE" + text(state) + "; away from the preferred replica: " + awayFromPreferred);
        Conformance.check(!awayFromPreferred.isEmpty(),
                "every partition is led by its preferred replica (the test should have moved some):%s", text(state));
    }

    private Set<TopicPartition> topicPartitions() {
        Set<TopicPartition> partitions = new HashSet<>();
        for (Integer p : describe().keySet()) {
            partitions.add(new TopicPartition(topic, p));
        }
        return partitions;
    }

    private Map<TopicPartition, Optional<Throwable>> elect(Set<TopicPartition> partitions) {
        return Conformance.await(admin.electLeaders(ElectionType.PREFERRED, partitions).partitions(),
                "electLeaders PREFERRED " + (partitions == null ? "(all partitions)" : partitions));
    }

    private void electPreferred() {
        Set<TopicPartition> partitions = topicPartitions();
        Map<TopicPartition, Optional<Throwable>> results = elect(partitions);
        System.out.println("ELECTION " + results);
        Conformance.checkEquals(partitions, results.keySet(), "partitions in the answer");
        for (TopicPartition tp : partitions) {
            Optional<Throwable> error = results.get(tp);
            if (awayFromPreferred.contains(tp)) {
                Conformance.check(error.isEmpty(), "%s: expected an election but got %s", tp,
                        error.map(Conformance::describe).orElse(""));
            } else {
                expectError(tp, error, ElectionNotNeededException.class);
            }
        }
    }

    private static void expectError(TopicPartition tp, Optional<Throwable> error, Class<? extends Throwable> expected) {
        Conformance.check(error.isPresent() && expected.isInstance(error.get()), "%s: expected %s but got %s", tp,
                expected.getSimpleName(), error.map(Conformance::describe).orElse("success"));
    }

    private void electPreferredAgain() {
        Set<TopicPartition> partitions = topicPartitions();
        Map<TopicPartition, Optional<Throwable>> results = elect(partitions);
        Conformance.checkEquals(partitions, results.keySet(), "partitions in the answer");
        results.forEach((tp, error) -> expectError(tp, error, ElectionNotNeededException.class));
    }

    private void electPreferredEverywhere() {
        // Kafka answers an all-partitions election only for partitions that needed one.
        Map<TopicPartition, Optional<Throwable>> results = elect(null);
        System.out.println("ELECTION (all partitions) " + results);
        Conformance.check(results.keySet().stream().noneMatch(tp -> tp.topic().equals(topic)),
                "partitions of %s that needed no election are listed: %s", topic, results);
    }

    private void electUnknownPartition() {
        TopicPartition unknown = new TopicPartition(topic, 99);
        Map<TopicPartition, Optional<Throwable>> results = elect(Set.of(unknown));
        Conformance.checkEquals(Set.of(unknown), results.keySet(), "partitions in the answer");
        expectError(unknown, results.get(unknown), UnknownTopicOrPartitionException.class);
    }

    private List<Conformance.Step> electUnavailableSteps(int partition) {
        TopicPartition tp = new TopicPartition(topic, partition);
        return List.of(
                new Conformance.Step("describeTopics: partition " + partition
                        + "'s preferred replica neither leads nor is in the ISR", () -> {
                    Map<Integer, TopicPartitionInfo> state = describe();
                    TopicPartitionInfo info = state.get(partition);
                    Conformance.check(info != null, "no partition %d:%s", partition, text(state));
                    int preferred = ids(info.replicas()).get(0);
                    Conformance.check(leaderId(info) != preferred && !ids(info.isr()).contains(preferred),
                            "preferred replica %d of partition %d is still leader or in the ISR:%s", preferred,
                            partition, text(state));
                    beforeUnavailableElection = text(state);
                    System.out.println("BEFORE" + beforeUnavailableElection);
                }),
                new Conformance.Step("electLeaders PREFERRED for " + tp + ": PreferredLeaderNotAvailableException",
                        () -> {
                            Map<TopicPartition, Optional<Throwable>> results = elect(Set.of(tp));
                            Conformance.checkEquals(Set.of(tp), results.keySet(), "partitions in the answer");
                            expectError(tp, results.get(tp), PreferredLeaderNotAvailableException.class);
                        }),
                new Conformance.Step("describeTopics unchanged by the failed election", () -> {
                    Thread.sleep(500);
                    Conformance.checkEquals(beforeUnavailableElection, text(describe()), "describeTopics");
                }));
    }

    // ------------------------------------------------------------------ log dirs

    private static Map<Integer, String> parseLogDirs(String spec) {
        Map<Integer, String> dirs = new TreeMap<>();
        for (String entry : spec.split(",")) {
            String[] parts = entry.split("=", 2);
            if (parts.length != 2) {
                System.err.println("LOG_DIRS must look like 1=/dir,2=/dir; got " + spec);
                System.exit(2);
            }
            dirs.put(Integer.parseInt(parts[0]), parts[1]);
        }
        return dirs;
    }

    private List<Conformance.Step> logDirSteps(Map<Integer, String> dirs) {
        return List.of(
                new Conformance.Step("createTopics " + topic + " on brokers " + LOG_DIR_ASSIGNMENT,
                        this::createForLogDirs),
                new Conformance.Step("default producer writes " + LOG_DIR_RECORDS_PER_PARTITION
                        + " records to each partition", this::produceSmallRecords),
                new Conformance.Step("describeLogDirs: one log dir per broker, listing the replicas it holds",
                        () -> describeLogDirs(dirs)),
                new Conformance.Step("describeReplicaLogDirs: each replica's current dir, none where none is",
                        () -> describeReplicaLogDirs(dirs)),
                new Conformance.Step("alterReplicaLogDirs to a path that is no log dir: LogDirNotFoundException",
                        () -> {
                            TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, 1);
                            String path = dirs.get(1) + "-not-a-log-dir";
                            Conformance.awaitFailure(admin.alterReplicaLogDirs(Map.of(replica, path)).values()
                                    .get(replica), LogDirNotFoundException.class, "move " + replica + " to " + path);
                        }));
    }

    private void createForLogDirs() throws Exception {
        Conformance.await(admin.createTopics(List.of(new NewTopic(topic, LOG_DIR_ASSIGNMENT))).all(), "createTopics");
        Map<Integer, TopicPartitionInfo> state = awaitState(s -> s.size() == LOG_DIR_ASSIGNMENT.size()
                && s.values().stream().allMatch(i -> i.leader() != null && i.isr().size() == 2),
                "every partition with a leader and an ISR of 2", STATE_TIMEOUT);
        System.out.println("CREATED" + text(state));
    }

    private void produceSmallRecords() throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps("conformance-logdirs"))) {
            for (int seq = 0; seq < LOG_DIR_RECORDS_PER_PARTITION; seq++) {
                for (int partition : LOG_DIR_ASSIGNMENT.keySet()) {
                    byte[] value = String.format("p%d-%06d", partition, seq).getBytes(StandardCharsets.US_ASCII);
                    acks.add(producer.send(new ProducerRecord<>(topic, partition, null, value)));
                }
            }
            producer.flush();
            checkContiguous(acks);
        }
    }

    private void describeLogDirs(Map<Integer, String> dirs) throws Exception {
        // acks=all put every record on both replicas; a follower's log holds the same batches, so the
        // same size, once its last fetch is written (a little after the acknowledgement).
        long deadline = System.nanoTime() + STATE_TIMEOUT.toNanos();
        String problem;
        do {
            Map<Integer, Map<String, LogDirDescription>> all = Conformance.await(
                    admin.describeLogDirs(dirs.keySet()).allDescriptions(), "describeLogDirs");
            Conformance.checkEquals(dirs.keySet(), all.keySet(), "brokers in the answer");
            Map<Integer, Long> sizes = new HashMap<>();
            StringBuilder shown = new StringBuilder();
            problem = null;
            for (Map.Entry<Integer, String> expected : dirs.entrySet()) {
                int broker = expected.getKey();
                Map<String, LogDirDescription> logDirs = all.get(broker);
                Conformance.checkEquals(Set.of(expected.getValue()), logDirs.keySet(), "log dirs of broker " + broker);
                LogDirDescription description = logDirs.get(expected.getValue());
                Conformance.check(description.error() == null, "broker %d's log dir has error %s", broker,
                        description.error());
                Conformance.check(description.totalBytes().orElse(0) > 0 && description.usableBytes().isPresent(),
                        "broker %d's log dir: total %s, usable %s", broker, description.totalBytes(),
                        description.usableBytes());
                Set<Integer> held = new TreeSet<>();
                for (Map.Entry<TopicPartition, ReplicaInfo> replica : description.replicaInfos().entrySet()) {
                    if (!replica.getKey().topic().equals(topic)) {
                        continue;
                    }
                    ReplicaInfo info = replica.getValue();
                    int partition = replica.getKey().partition();
                    held.add(partition);
                    Conformance.check(!info.isFuture() && info.offsetLag() == 0, "broker %d, partition %d: %s",
                            broker, partition, info);
                    Long other = sizes.putIfAbsent(partition, info.size());
                    if (info.size() <= 0 || (other != null && other != info.size())) {
                        problem = String.format("partition %d: size %d on broker %d, %s on the other replica",
                                partition, info.size(), broker, other);
                    }
                }
                Set<Integer> assigned = new TreeSet<>();
                LOG_DIR_ASSIGNMENT.forEach((p, replicas) -> {
                    if (replicas.contains(broker)) {
                        assigned.add(p);
                    }
                });
                Conformance.checkEquals(assigned, held,
                        "partitions of " + topic + " in broker " + broker + "'s log dir");
                shown.append(String.format(" broker %d: %s %s", broker, expected.getValue(), held));
            }
            if (problem == null) {
                System.out.println("LOG_DIRS" + shown + "; sizes " + sizes);
                return;
            }
            Thread.sleep(200);
        } while (System.nanoTime() < deadline);
        throw new Conformance.CheckFailed("replica sizes not equal and positive within " + STATE_TIMEOUT.toSeconds()
                + " s: " + problem);
    }

    private void describeReplicaLogDirs(Map<Integer, String> dirs) {
        List<TopicPartitionReplica> replicas = new ArrayList<>();
        LOG_DIR_ASSIGNMENT.forEach((p, brokers) -> brokers.forEach(
                b -> replicas.add(new TopicPartitionReplica(topic, p, b))));
        // partition 0 has no replica on broker 3
        TopicPartitionReplica absent = new TopicPartitionReplica(topic, 0, 3);
        List<TopicPartitionReplica> asked = new ArrayList<>(replicas);
        asked.add(absent);
        Map<TopicPartitionReplica, ReplicaLogDirInfo> infos = Conformance.await(
                admin.describeReplicaLogDirs(asked).all(), "describeReplicaLogDirs");
        for (TopicPartitionReplica replica : replicas) {
            ReplicaLogDirInfo info = infos.get(replica);
            Conformance.check(info != null, "no answer for %s", replica);
            Conformance.checkEquals(dirs.get(replica.brokerId()), info.getCurrentReplicaLogDir(),
                    "current log dir of " + replica);
            Conformance.checkEquals(null, info.getFutureReplicaLogDir(), "future log dir of " + replica);
        }
        ReplicaLogDirInfo none = infos.get(absent);
        Conformance.check(none != null && none.getCurrentReplicaLogDir() == null,
                "%s does not exist but has %s", absent, none);
        System.out.println("REPLICA_LOG_DIRS " + infos.get(replicas.get(0)));
    }

    // ------------------------------------------------------------------ topic state

    private Map<Integer, TopicPartitionInfo> describe() {
        Map<Integer, TopicPartitionInfo> state = new TreeMap<>();
        for (TopicPartitionInfo info : Conformance.await(admin.describeTopics(List.of(topic)).allTopicNames(),
                "describeTopics " + topic).get(topic).partitions()) {
            state.put(info.partition(), info);
        }
        return state;
    }

    /** describeTopics until {@code reached} holds (within {@code timeout}); a timeout fails with the last state. */
    private Map<Integer, TopicPartitionInfo> awaitState(Predicate<Map<Integer, TopicPartitionInfo>> reached,
                                                        String what, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            Map<Integer, TopicPartitionInfo> state = describe();
            if (reached.test(state)) {
                return state;
            }
            if (System.nanoTime() > deadline) {
                throw new Conformance.CheckFailed(what + ": not reached within " + timeout.toSeconds()
                        + " s; describeTopics:" + text(state));
            }
            Thread.sleep(200);
        }
    }

    private static int leaderId(TopicPartitionInfo info) {
        return info.leader() == null ? -1 : info.leader().id();
    }

    private static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }

    private static List<Integer> sortedIds(List<Node> nodes) {
        return nodes.stream().map(Node::id).sorted().toList();
    }

    /** The partitions as one comparable line; ISR members sorted (their order carries no meaning). */
    private static String text(Map<Integer, TopicPartitionInfo> state) {
        StringBuilder text = new StringBuilder();
        for (TopicPartitionInfo info : state.values()) {
            text.append(String.format(" p%d:leader=%d,replicas=%s,isr=%s", info.partition(), leaderId(info),
                    ids(info.replicas()), sortedIds(info.isr())));
        }
        return text.toString();
    }
}
