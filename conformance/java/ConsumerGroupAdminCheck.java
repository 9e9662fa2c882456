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
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ConsumerGroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java AdminClient's consumer-group calls on a KIP-848 group (members with group.protocol=consumer).
 *
 * listConsumerGroups with type and state filters (ListGroups v5), describeConsumerGroups (type
 * CONSUMER through ConsumerGroupDescribe: server assignor, members with current and target
 * assignment), listConsumerGroupOffsets with the lag computed from listOffsets, the changes Kafka
 * refuses while a member remains, and alter/delete offsets and deleteConsumerGroups once it is empty.
 *
 * usage: ConsumerGroupAdminCheck BOOTSTRAP PREFIX
 */
public final class ConsumerGroupAdminCheck {
    private static final String USAGE = "ConsumerGroupAdminCheck BOOTSTRAP PREFIX";
    private static final int PARTITIONS = 3;
    private static final int RECORDS = 30;
    private static final int MORE = 2;  // records per partition produced after the commit: the lag

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String prefix = Conformance.arg(args, 1, USAGE);
        String topic = prefix + "-topic";
        String group = prefix + "-group";
        String missing = prefix + "-never-used";
        String clientId = prefix + "-client";
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        consumerProps.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        Map<TopicPartition, OffsetAndMetadata> committed = new HashMap<>();
        int status;
        try (Admin admin = Admin.create(adminProps)) {
            KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps);
            status = Conformance.runSteps("ConsumerGroupAdminCheck", List.of(
                new Conformance.Step("create topic and produce " + RECORDS + " records", () -> {
                    Conformance.await(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all(),
                            "createTopics");
                    produce(bootstrap, topic, 0, RECORDS);
                }),
                new Conformance.Step("a group.protocol=consumer member reads everything and commits", () -> {
                    consumer.subscribe(List.of(topic));
                    int read = 0;
                    long deadline = System.nanoTime() + Duration.ofSeconds(40).toNanos();
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
                new Conformance.Step("listConsumerGroups (type CONSUMER; type and state filters)", () -> {
                    ConsumerGroupListing listing = listed(admin, new ListConsumerGroupsOptions()).get(group);
                    Conformance.check(listing != null, "group %s not listed", group);
                    Conformance.checkEquals(Optional.of(GroupType.CONSUMER), listing.type(), "listed type");
                    Conformance.checkEquals(Optional.of(ConsumerGroupState.STABLE), listing.state(), "listed state");
                    Conformance.check(listed(admin, new ListConsumerGroupsOptions()
                            .withTypes(Set.of(GroupType.CONSUMER))).containsKey(group), "not listed as CONSUMER");
                    Conformance.check(!listed(admin, new ListConsumerGroupsOptions()
                            .withTypes(Set.of(GroupType.CLASSIC))).containsKey(group), "listed as CLASSIC");
                    Conformance.check(listed(admin, new ListConsumerGroupsOptions()
                            .inStates(Set.of(ConsumerGroupState.STABLE))).containsKey(group), "not listed as Stable");
                    Conformance.check(!listed(admin, new ListConsumerGroupsOptions()
                            .inStates(Set.of(ConsumerGroupState.EMPTY))).containsKey(group), "listed as Empty");
                }),
                new Conformance.Step("describeConsumerGroups (consumer group via ConsumerGroupDescribe, unknown group)",
                        () -> {
                    Map<String, ConsumerGroupDescription> described = Conformance.await(
                            admin.describeConsumerGroups(List.of(group, missing)).all(), "describeConsumerGroups");
                    ConsumerGroupDescription live = described.get(group);
                    Conformance.checkEquals(GroupType.CONSUMER, live.type(), "type");
                    Conformance.checkEquals(ConsumerGroupState.STABLE, live.state(), "state");
                    Conformance.checkEquals("uniform", live.partitionAssignor(), "partitionAssignor (server assignor)");
                    Conformance.checkEquals(false, live.isSimpleConsumerGroup(), "isSimpleConsumerGroup");
                    Conformance.checkEquals(1, live.members().size(), "member count");
                    MemberDescription member = live.members().iterator().next();
                    Conformance.checkEquals(clientId, member.clientId(), "clientId");
                    Conformance.check(member.host().startsWith("/"), "member host %s", member.host());
                    Conformance.checkEquals(committed.keySet(), member.assignment().topicPartitions(), "assignment");
                    Conformance.checkEquals(Optional.of(new MemberAssignment(committed.keySet())),
                            member.targetAssignment(), "target assignment");
                    Conformance.checkEquals(ConsumerGroupState.DEAD, described.get(missing).state(), "unknown group");
                    Conformance.checkEquals(GroupType.CLASSIC, described.get(missing).type(),
                            "unknown group's type (DescribeGroups fallback)");
                }),
                new Conformance.Step("listConsumerGroupOffsets and the lag after " + PARTITIONS * MORE + " more records",
                        () -> {
                    Conformance.checkEquals(committed, offsets(admin, group), "committed offsets");
                    produce(bootstrap, topic, RECORDS, PARTITIONS * MORE);
                    Map<TopicPartition, OffsetSpec> latest = committed.keySet().stream()
                            .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
                    Map<TopicPartition, ListOffsetsResultInfo> ends = Conformance.await(
                            admin.listOffsets(latest).all(), "listOffsets");
                    long lag = 0;
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                        lag += ends.get(e.getKey()).offset() - e.getValue().offset();
                    }
                    Conformance.checkEquals((long) PARTITIONS * MORE, lag, "total lag");
                }),
                new Conformance.Step("changes refused while the group has a member", () -> {
                    Conformance.awaitFailure(admin.alterConsumerGroupOffsets(group,
                            Map.of(tp0, new OffsetAndMetadata(5))).all(), UnknownMemberIdException.class,
                            "alterConsumerGroupOffsets on a live group");
                    Conformance.awaitFailure(admin.deleteConsumerGroupOffsets(group, Set.of(tp0)).all(),
                            GroupSubscribedToTopicException.class, "deleteConsumerGroupOffsets of a subscribed topic");
                    Conformance.awaitFailure(admin.deleteConsumerGroups(List.of(group)).all(),
                            GroupNotEmptyException.class, "deleteConsumerGroups of a live group");
                }),
                new Conformance.Step("the member leaves: the consumer group is Empty", () -> {
                    consumer.close(Duration.ofSeconds(10));
                    ConsumerGroupDescription empty = Conformance.await(
                            admin.describeConsumerGroups(List.of(group)).all(), "describeConsumerGroups").get(group);
                    Conformance.checkEquals(GroupType.CONSUMER, empty.type(), "type after close");
                    Conformance.checkEquals(ConsumerGroupState.EMPTY, empty.state(), "state after close");
                    Conformance.checkEquals(0, empty.members().size(), "members after close");
                    Conformance.check(listed(admin, new ListConsumerGroupsOptions()
                            .inStates(Set.of(ConsumerGroupState.EMPTY))).containsKey(group), "not listed as Empty");
                }),
                new Conformance.Step("alterConsumerGroupOffsets and deleteConsumerGroupOffsets on the empty group", () -> {
                    Conformance.await(admin.alterConsumerGroupOffsets(group,
                            Map.of(tp0, new OffsetAndMetadata(5, "altered"))).all(), "alterConsumerGroupOffsets");
                    committed.put(tp0, new OffsetAndMetadata(5, "altered"));
                    Conformance.checkEquals(committed, offsets(admin, group), "offsets after alter");
                    Conformance.await(admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all(),
                            "deleteConsumerGroupOffsets");
                    committed.remove(tp1);
                    Conformance.checkEquals(committed, offsets(admin, group), "offsets after delete");
                }),
                new Conformance.Step("deleteConsumerGroups on the empty consumer group", () -> {
                    Conformance.await(admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups");
                    Conformance.check(!listed(admin, new ListConsumerGroupsOptions()).containsKey(group),
                            "deleted group still listed");
                    Conformance.checkEquals(ConsumerGroupState.DEAD, Conformance.await(
                            admin.describeConsumerGroups(List.of(group)).all(), "describe").get(group).state(),
                            "state after delete");
                    Conformance.checkEquals(Map.of(), offsets(admin, group), "offsets after delete");
                })));
        }
        System.exit(status);
    }

    private static void produce(String bootstrap, String topic, int first, int count) {
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (int i = first; i < first + count; i++) {
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
            }
        }
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
