import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Creates a topic, produces COUNT records (default producer: acks=all, idempotent) and reads them
 * back, every client built from the given client properties file on top of bootstrap.servers: the
 * TLS settings (security.protocol=SSL, ssl.truststore.*, ssl.keystore.* for mTLS) come from there.
 *
 * usage: SslCheck BOOTSTRAP TOPIC PROPERTIES_FILE COUNT
 */
public final class SslCheck {
    private static final String USAGE = "SslCheck BOOTSTRAP TOPIC PROPERTIES_FILE COUNT";

    public static void main(String[] args) throws Exception {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        String file = Conformance.arg(args, 2, USAGE);
        int count = Integer.parseInt(Conformance.arg(args, 3, USAGE));
        Properties base = new Properties();
        try (InputStream in = new FileInputStream(file)) {
            base.load(in);
        }
        base.put("bootstrap.servers", bootstrap);
        List<Conformance.Step> steps = List.of(
                new Conformance.Step("create topic " + topic + " over " + base.getProperty("security.protocol"),
                        () -> createTopic(base, topic)),
                new Conformance.Step("produce " + count + " records", () -> produce(base, topic, count)),
                new Conformance.Step("consume them back", () -> consume(base, topic, count)));
        System.exit(Conformance.runSteps("SslCheck", steps));
    }

    private static void createTopic(Properties base, String topic) {
        Properties props = new Properties();
        props.putAll(base);
        try (Admin admin = Admin.create(props)) {
            Conformance.await(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(),
                    "createTopics(" + topic + ")");
        }
    }

    private static void produce(Properties base, String topic, int count) throws Exception {
        Properties props = new Properties();
        props.putAll(base);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, 0, null, value(i))));
            }
            for (int i = 0; i < count; i++) {
                RecordMetadata metadata = acks.get(i).get(30, TimeUnit.SECONDS);
                Conformance.checkEquals((long) i, metadata.offset(), "offset of record " + i);
            }
        }
    }

    private static void consume(Properties base, String topic, int count) {
        Properties props = new Properties();
        props.putAll(base);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            int seen = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(40).toNanos();
            while (seen < count) {
                Conformance.check(System.nanoTime() < deadline, "read only %d of %d records", seen, count);
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    Conformance.checkEquals((long) seen, record.offset(), "offset");
                    Conformance.checkEquals(new String(value(seen), StandardCharsets.UTF_8),
                            new String(record.value(), StandardCharsets.UTF_8), "value at offset " + seen);
                    seen++;
                }
            }
        }
    }

    private static byte[] value(int i) {
        return ("ssl-check-" + i + "-" + "x".repeat(i % 2000)).getBytes(StandardCharsets.UTF_8);
    }
}
