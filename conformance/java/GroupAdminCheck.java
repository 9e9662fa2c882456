import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java AdminClient's consumer-group calls against a live and then an empty group.
 *
 * listConsumerGroups (with and without a state filter), describeConsumerGroups (which tries
 * ConsumerGroupDescribe first and falls back to DescribeGroups), listConsumerGroupOffsets,
 * alterConsumerGroupOffsets, deleteConsumerGroupOffsets and deleteConsumerGroups, each with the
 * errors Kafka gives while the group still has members.
 *
 * usage: GroupAdminCheck BOOTSTRAP PREFIX
 */
public final class GroupAdminCheck {
    private static final String USAGE = "GroupAdminCheck BOOTSTRAP PREFIX";
    private static final int PARTITIONS = 3;
    private static final int RECORDS = 30;

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String prefix = Conformance.arg(args, 1, USAGE);
        String topic = prefix + "-topic";
        String group = prefix + "-group";
        String missing = prefix + "-never-used";
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        Map<TopicPartition, OffsetAndMetadata> committed = new HashMap<>();
        int status;
        try (Admin admin = Admin.create(adminProps)) {
            KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps);
            status = Conformance.runSteps("GroupAdminCheck", List.of(
                new Conformance.Step("create topic and produce " + RECORDS + " records", () -> {
                    Conformance.await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all(),
                            "createTopics");
                    Properties producerProps = new Properties();
                    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                    producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
                        for (int i = 0; i < RECORDS; i++) {
                            producer.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
                        }
                    }
                }),
                new Conformance.Step("a consumer group reads everything and commits with metadata", () -> {
                    consumer.subscribe(List.of(topic));
                    int read = 0;
                    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                    while (read < RECORDS) {
                        Conformance.check(System.nanoTime() < deadline, "read %d of %d records", read, RECORDS);
                        read += consumer.poll(Duration.ofMillis(200)).count();
                    }
                    for (TopicPartition tp : consumer.assignment()) {
                        committed.put(tp, new OffsetAndMetadata(consumer.position(tp), "meta-" + tp.partition()));
                    }
                    consumer.commitSync(committed);
                    Conformance.checkEquals(PARTITIONS, committed.size(), "partitions assigned");
                }),
                new Conformance.Step("listConsumerGroups (all, Stable filter, Empty filter)", () -> {
                    Map<String, ConsumerGroupListing> all = listed(admin, new ListConsumerGroupsOptions());
                    ConsumerGroupListing listing = all.get(group);
                    Conformance.check(listing != null, "group %s not listed: %s", group, all.keySet());
                    Conformance.checkEquals(Optional.of(ConsumerGroupState.STABLE), listing.state(), "listed state");
                    Conformance.checkEquals(false, listing.isSimpleConsumerGroup(), "isSimpleConsumerGroup");
                    Conformance.check(listed(admin, new ListConsumerGroupsOptions()
                            .inStates(Set.of(ConsumerGroupState.STABLE))).containsKey(group), "not listed as Stable");
                    Conformance.check(!listed(admin, new ListConsumerGroupsOptions()
                            .inStates(Set.of(ConsumerGroupState.EMPTY))).containsKey(group), "listed as Empty");
                }),
                new Conformance.Step("describeConsumerGroups (live group, unknown group)", () -> {
                    Map<String, ConsumerGroupDescription> described = Conformance.await(
                            admin.describeConsumerGroups(List.of(group, missing)).all(), "describeConsumerGroups");
                    ConsumerGroupDescription live = described.get(group);
                    Conformance.checkEquals(ConsumerGroupState.STABLE, live.state(), "state");
                    Conformance.checkEquals("range", live.partitionAssignor(), "partitionAssignor");
                    Conformance.checkEquals(false, live.isSimpleConsumerGroup(), "isSimpleConsumerGroup");
                    Conformance.checkEquals(1, live.members().size(), "member count");
                    MemberDescription member = live.members().iterator().next();
                    Conformance.checkEquals(committed.keySet(), member.assignment().topicPartitions(), "assignment");
                    Conformance.check(member.host().startsWith("/"), "member host %s", member.host());
                    Conformance.checkEquals(ConsumerGroupState.DEAD, described.get(missing).state(), "unknown group");
                    Conformance.checkEquals(0, described.get(missing).members().size(), "unknown group members");
                }),
                new Conformance.Step("listConsumerGroupOffsets (offsets and metadata; unknown group)", () -> {
                    Conformance.checkEquals(committed, offsets(admin, group), "committed offsets");
                    Conformance.checkEquals(Map.of(), offsets(admin, missing), "offsets of an unknown group");
                }),
                new Conformance.Step("changes refused while the group has members", () -> {
                    Conformance.awaitFailure(admin.alterConsumerGroupOffsets(group,
                            Map.of(tp0, new OffsetAndMetadata(5))).all(), UnknownMemberIdException.class,
                            "alterConsumerGroupOffsets on a live group");
                    Conformance.awaitFailure(admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all(),
                            GroupSubscribedToTopicException.class, "deleteConsumerGroupOffsets of a subscribed topic");
                    Conformance.awaitFailure(admin.deleteConsumerGroups(List.of(group)).all(),
                            GroupNotEmptyException.class, "deleteConsumerGroups of a live group");
                }),
                new Conformance.Step("the member leaves: the group is Empty", () -> {
                    consumer.close(Duration.ofSeconds(10));
                    ConsumerGroupDescription empty = Conformance.await(
                            admin.describeConsumerGroups(List.of(group)).all(), "describeConsumerGroups").get(group);
                    Conformance.checkEquals(ConsumerGroupState.EMPTY, empty.state(), "state after close");
                    Conformance.checkEquals(0, empty.members().size(), "members after close");
                }),
                new Conformance.Step("alterConsumerGroupOffsets on the empty group", () -> {
                    Conformance.await(admin.alterConsumerGroupOffsets(group,
                            Map.of(tp0, new OffsetAndMetadata(5, "altered"))).all(), "alterConsumerGroupOffsets");
                    committed.put(tp0, new OffsetAndMetadata(5, "altered"));
                    Conformance.checkEquals(committed, offsets(admin, group), "offsets after alter");
                }),
                new Conformance.Step("deleteConsumerGroupOffsets on the empty group", () -> {
                    Conformance.await(admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all(),
                            "deleteConsumerGroupOffsets");
                    committed.remove(tp1);
                    Conformance.checkEquals(committed, offsets(admin, group), "offsets after delete");
                }),
                new Conformance.Step("deleteConsumerGroups (empty group, then unknown group)", () -> {
                    Conformance.await(admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups");
                    Conformance.check(!listed(admin, new ListConsumerGroupsOptions()).containsKey(group),
                            "deleted group still listed");
                    Conformance.checkEquals(ConsumerGroupState.DEAD, Conformance.await(
                            admin.describeConsumerGroups(List.of(group)).all(), "describe").get(group).state(),
                            "state after delete");
                    Conformance.checkEquals(Map.of(), offsets(admin, group), "offsets after delete");
                    Conformance.awaitFailure(admin.deleteConsumerGroups(List.of(missing)).all(),
                            GroupIdNotFoundException.class, "deleteConsumerGroups of an unknown group");
                })));
        }
        System.exit(status);
    }

    private static Map<String, ConsumerGroupListing> listed(Admin admin, ListConsumerGroupsOptions options) {
        return Conformance.await(admin.listConsumerGroups(options).all(), "listConsumerGroups").stream()
                .collect(Collectors.toMap(ConsumerGroupListing::groupId, listing -> listing));
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsets(Admin admin, String group) {
        Map<TopicPartition, OffsetAndMetadata> found = Conformance.await(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
        Map<TopicPartition, OffsetAndMetadata> withoutEpochs = new HashMap<>();
        found.forEach((tp, o) -> withoutEpochs.put(tp, new OffsetAndMetadata(o.offset(), o.metadata())));
        return withoutEpochs;
    }
}
