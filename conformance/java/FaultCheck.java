import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A Java producer against a broker told (by fault injection, kafkapy/broker/faults.py) never to
 * answer Produce: the send must fail with a TimeoutException within delivery.timeout.ms, not hang
 * and not succeed. The test (tests/testing/test_faults.py) injects the rule before and checks the
 * broker recorded the unanswered Produce requests.
 *
 * usage: FaultCheck BOOTSTRAP TOPIC
 */
public final class FaultCheck {
    private static final String USAGE = "FaultCheck BOOTSTRAP TOPIC";

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        List<Conformance.Step> steps = List.of(
                new Conformance.Step("unanswered produce times out", () -> produceTimesOut(bootstrap, topic)));
        System.exit(Conformance.runSteps("FaultCheck", steps));
    }

    private static void produceTimesOut(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "fault-check");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "1500");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "3000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            Future<RecordMetadata> sent = producer.send(new ProducerRecord<>(topic, "never".getBytes()));
            try {
                RecordMetadata metadata = sent.get(20, TimeUnit.SECONDS);
                throw new Conformance.CheckFailed("the send succeeded (offset " + metadata.offset()
                        + ") although Produce is never answered");
            } catch (ExecutionException e) {
                Conformance.check(e.getCause() instanceof TimeoutException,
                        "expected a TimeoutException, got %s", Conformance.describe(e.getCause()));
                long ms = (System.nanoTime() - start) / 1_000_000;
                Conformance.check(ms >= 1400, "timed out after %d ms, before request.timeout.ms", ms);
                System.out.println("timed out after " + ms + " ms: " + Conformance.describe(e.getCause()));
            }
            producer.close(java.time.Duration.ofSeconds(5));
        }
    }
}
