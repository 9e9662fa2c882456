import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produces a {@link RecordPlan} with a KafkaProducer on its DEFAULT settings.
 *
 * Defaults in kafka-clients 3.9 mean acks=all and enable.idempotence=true, so the broker must
 * serve InitProducerId and accept idempotent v2 batches. The program creates the topic, sends
 * every planned record, and checks each acknowledgement (partition, contiguous offsets in send
 * order, the create-time timestamp echoed back).
 *
 * usage: ProducerCheck BOOTSTRAP TOPIC PARTITIONS COUNT COMPRESSION(none|gzip|snappy|lz4|zstd)
 */
public final class ProducerCheck {
    private static final String USAGE = "ProducerCheck BOOTSTRAP TOPIC PARTITIONS COUNT COMPRESSION";

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        int partitions = Integer.parseInt(Conformance.arg(args, 2, USAGE));
        int count = Integer.parseInt(Conformance.arg(args, 3, USAGE));
        String compression = Conformance.arg(args, 4, USAGE);
        RecordPlan plan = new RecordPlan(partitions, count);

        List<Conformance.Step> steps = List.of(
                new Conformance.Step("create topic " + topic, () -> createTopic(bootstrap, topic, partitions)),
                new Conformance.Step("produce " + count + " records (compression=" + compression + ")",
                        () -> produce(bootstrap, topic, compression, plan)));
        System.exit(Conformance.runSteps("ProducerCheck", steps));
    }

    private static void createTopic(String bootstrap, String topic, int partitions) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-producer-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            NewTopic newTopic = new NewTopic(topic, partitions, (short) 1);
            Conformance.await(admin.createTopics(List.of(newTopic)).all(), "createTopics(" + topic + ")");
        }
    }

    private static void produce(String bootstrap, String topic, String compression, RecordPlan plan)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "conformance-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (!compression.equals("none")) {
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        }
        // Everything else stays at the client defaults on purpose (acks=all, idempotence on).

        List<Future<RecordMetadata>> acks = new ArrayList<>(plan.count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (RecordPlan.PlannedRecord planned : plan.all()) {
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                        topic, planned.explicitPartition(), planned.timestamp(), planned.key(), planned.value(),
                        planned.headers());
                acks.add(producer.send(record));
            }
            producer.flush();

            long[] nextOffset = new long[plan.partitions];
            for (RecordPlan.PlannedRecord planned : plan.all()) {
                RecordMetadata metadata;
                try {
                    metadata = acks.get(planned.index()).get(Conformance.CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                } catch (java.util.concurrent.ExecutionException error) {
                    throw new Conformance.CheckFailed("send of record " + planned.index() + " failed: "
                            + Conformance.describe(error.getCause()), error.getCause());
                }
                String where = "record " + planned.index();
                Conformance.checkEquals(planned.partition(), metadata.partition(), where + " partition");
                Conformance.checkEquals(nextOffset[planned.partition()], metadata.offset(),
                        where + " offset (offsets must be contiguous in send order on a fresh topic)");
                Conformance.checkEquals(planned.timestamp(), metadata.timestamp(),
                        where + " timestamp (CreateTime topic echoes the producer's timestamp)");
                nextOffset[planned.partition()]++;
            }
            System.out.printf("produced %d records; per-partition counts %s%n", plan.count,
                    java.util.Arrays.toString(nextOffset));
        }
    }

    private ProducerCheck() {}
}
