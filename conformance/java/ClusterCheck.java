import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A kafkapy cluster seen by the Java clients: the AdminClient's describeCluster and describeTopics
 * show every broker, a controller, and for a replication-factor-3 topic leaders on every broker
 * with an ISR of 3; a default producer (acks=all, idempotent) writes to partitions led by
 * different brokers and an assign-mode consumer reads every record back, in order.
 *
 * usage: ClusterCheck BOOTSTRAP TOPIC BROKERS PARTITIONS COUNT
 */
public final class ClusterCheck {
    private static final String USAGE = "ClusterCheck BOOTSTRAP TOPIC BROKERS PARTITIONS COUNT";

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        int brokers = Integer.parseInt(Conformance.arg(args, 2, USAGE));
        int partitions = Integer.parseInt(Conformance.arg(args, 3, USAGE));
        int count = Integer.parseInt(Conformance.arg(args, 4, USAGE));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-cluster-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        int status;
        try (Admin admin = Admin.create(props)) {
            List<Conformance.Step> steps = List.of(
                    new Conformance.Step("describeCluster lists " + brokers + " brokers and a controller",
                            () -> describeCluster(admin, brokers)),
                    new Conformance.Step("createTopics " + topic + " with replication factor 3",
                            () -> Conformance.await(admin.createTopics(
                                    List.of(new NewTopic(topic, partitions, (short) 3))).all(), "createTopics")),
                    new Conformance.Step("describeTopics: leaders on every broker, ISR of 3",
                            () -> awaitFullIsr(admin, topic, brokers, partitions)),
                    new Conformance.Step("default producer writes " + count + " records",
                            () -> produce(bootstrap, topic, partitions, count)),
                    new Conformance.Step("assign-mode consumer reads every record back in order",
                            () -> consume(bootstrap, topic, partitions, count)));
            status = Conformance.runSteps("ClusterCheck", steps);
        }
        System.exit(status);
    }

    private static void describeCluster(Admin admin, int brokers) {
        DescribeClusterResult cluster = admin.describeCluster();
        List<Node> nodes = new ArrayList<>(Conformance.await(cluster.nodes(), "describeCluster.nodes"));
        Node controller = Conformance.await(cluster.controller(), "describeCluster.controller");
        Conformance.checkEquals(brokers, nodes.size(), "number of brokers");
        Conformance.check(controller != null && controller.id() >= 1, "controller %s", controller);
        Conformance.check(nodes.stream().anyMatch(n -> n.id() == controller.id()),
                "controller %s is one of the brokers %s", controller, nodes);
    }

    private static void awaitFullIsr(Admin admin, String topic, int brokers, int partitions) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            TopicDescription description;
            try {
                description = Conformance.await(
                        admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
            } catch (Conformance.CheckFailed error) {
                // the broker asked may not have the new topic's metadata yet (UpdateMetadata from the
                // controller is on its way), as with Kafka: ask again
                if (!(error.getCause() instanceof UnknownTopicOrPartitionException)) {
                    throw error;
                }
                last = " (topic not known yet to the broker asked)";
                Thread.sleep(200);
                continue;
            }
            Set<Integer> leaders = new HashSet<>();
            boolean full = description.partitions().size() == partitions;
            StringBuilder text = new StringBuilder();
            for (TopicPartitionInfo info : description.partitions()) {
                full &= info.leader() != null && info.isr().size() == 3 && info.replicas().size() == 3;
                if (info.leader() != null) {
                    leaders.add(info.leader().id());
                }
                text.append(String.format(" p%d:leader=%s,isr=%d", info.partition(),
                        info.leader() == null ? "none" : info.leader().id(), info.isr().size()));
            }
            last = text.toString();
            if (full && leaders.size() == Math.min(brokers, partitions)) {
                System.out.println("LEADERS" + last);
                return;
            }
            Thread.sleep(200);
        }
        throw new Conformance.CheckFailed("no full ISR with spread leaders within 30 s:" + last);
    }

    private static byte[] value(int partition, int seq) {
        return String.format("p%d-%06d", partition, seq).getBytes();
    }

    private static void produce(String bootstrap, String topic, int partitions, int count) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "conformance-cluster-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                int partition = i % partitions;
                acks.add(producer.send(new ProducerRecord<>(topic, partition, null, value(partition, i / partitions))));
            }
            producer.flush();
            Map<Integer, Long> next = new HashMap<>();
            for (Future<RecordMetadata> ack : acks) {
                RecordMetadata meta = ack.get();
                long expected = next.getOrDefault(meta.partition(), 0L);
                Conformance.checkEquals(expected, meta.offset(), "offset in partition " + meta.partition());
                next.put(meta.partition(), expected + 1);
            }
        }
    }

    private static void consume(String bootstrap, String topic, int partitions, int count) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "conformance-cluster-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> assignment = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                assignment.add(new TopicPartition(topic, p));
            }
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            Map<Integer, Integer> seen = new HashMap<>();
            int total = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(45).toNanos();
            while (total < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    int seq = seen.getOrDefault(record.partition(), 0);
                    Conformance.checkEquals(new String(value(record.partition(), seq)), new String(record.value()),
                            "record " + record.offset() + " of partition " + record.partition());
                    seen.put(record.partition(), seq + 1);
                    total++;
                }
            }
            Conformance.checkEquals(count, total, "records read");
        }
    }
}
