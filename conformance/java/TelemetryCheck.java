import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ClientMetricsResourceListing;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Client telemetry (KIP-714) with kafka-clients 3.9: the Admin API configures a client-metrics
 * subscription (a CLIENT_METRICS config resource), describes and lists it; then a KafkaProducer on
 * its defaults (enable.metrics.push=true) produces and pushes its metrics for a few intervals and
 * prints its client instance id ("INSTANCE <uuid>") for the Python side to find on /metrics.
 *
 * usage: TelemetryCheck BOOTSTRAP TOPIC SUBSCRIPTION CLIENT_ID
 */
public final class TelemetryCheck {
    private static final String USAGE = "TelemetryCheck BOOTSTRAP TOPIC SUBSCRIPTION CLIENT_ID";

    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, USAGE);
        String topic = Conformance.arg(args, 1, USAGE);
        String subscription = Conformance.arg(args, 2, USAGE);
        String clientId = Conformance.arg(args, 3, USAGE);
        List<Conformance.Step> steps = List.of(
                new Conformance.Step("configure, describe and list subscription " + subscription,
                        () -> subscribe(bootstrap, subscription, clientId)),
                new Conformance.Step("produce and push telemetry as " + clientId,
                        () -> produce(bootstrap, topic, clientId)));
        System.exit(Conformance.runSteps("TelemetryCheck", steps));
    }

    private static void subscribe(String bootstrap, String name, String clientId) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-telemetry-admin");
        try (Admin admin = Admin.create(props)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, name);
            Collection<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("interval.ms", "1000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("match", "client_id=" + clientId), AlterConfigOp.OpType.SET));
            Conformance.await(admin.incrementalAlterConfigs(Map.of(resource, ops)).all(), "incrementalAlterConfigs");
            Config config = Conformance.await(admin.describeConfigs(List.of(resource)).all(), "describeConfigs")
                    .get(resource);
            Conformance.checkEquals("1000", config.get("interval.ms").value(), "interval.ms");
            Collection<ClientMetricsResourceListing> listed =
                    Conformance.await(admin.listClientMetricsResources().all(), "listClientMetricsResources");
            Conformance.check(listed.stream().anyMatch(l -> l.name().equals(name)), "%s not listed in %s", name, listed);
            // a bad interval is refused with Kafka's error
            Collection<AlterConfigOp> bad = List.of(
                    new AlterConfigOp(new ConfigEntry("interval.ms", "1"), AlterConfigOp.OpType.SET));
            Conformance.awaitFailure(admin.incrementalAlterConfigs(Map.of(resource, bad)).all(),
                    org.apache.kafka.common.errors.InvalidConfigurationException.class, "interval.ms=1");
        }
    }

    private static void produce(String bootstrap, String topic, String clientId) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < 50; i++) {
                producer.send(new ProducerRecord<>(topic, ("v" + i).getBytes()));
            }
            producer.flush();
            Uuid instance = producer.clientInstanceId(Duration.ofSeconds(20));
            System.out.println("INSTANCE " + instance);
            Thread.sleep(3500);  // three push intervals
        }
    }

    private TelemetryCheck() {}
}
