import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.UnacceptableCredentialException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * SASL with the Java client: the AdminClient's alterUserScramCredentials / describeUserScramCredentials
 * (over ADMIN_BOOTSTRAP, a PLAINTEXT listener), then an Admin, a default producer and a consumer
 * authenticating with PLAIN (alice / PLAIN_PASSWORD from the broker's JAAS config), SCRAM-SHA-256
 * and SCRAM-SHA-512 over SASL_BOOTSTRAP (SASL_PLAINTEXT); a producer that keeps sending across the
 * listener's session lifetime (it must re-authenticate, KIP-368); a wrong password fails with
 * SaslAuthenticationException. With TRUSTSTORE_PEM (a PEM file of trusted CA certificates) the SASL
 * clients use SASL_SSL instead (ssl.truststore.type=PEM), everything else unchanged.
 *
 * usage: SaslCheck ADMIN_BOOTSTRAP SASL_BOOTSTRAP PREFIX PLAIN_PASSWORD [TRUSTSTORE_PEM]
 */
public final class SaslCheck {
    private static final String USAGE =
            "SaslCheck ADMIN_BOOTSTRAP SASL_BOOTSTRAP PREFIX PLAIN_PASSWORD [TRUSTSTORE_PEM]";
    private static final String SCRAM_USER = "java-sam";
    private static final String SCRAM_PASSWORD = "java-sam-Pw-31f0";
    private static final int COUNT = 300;
    /** The PEM trust store of the SASL_SSL listener; null for SASL_PLAINTEXT. */
    private static String truststorePem;

    public static void main(String[] args) throws Exception {
        String adminBootstrap = Conformance.arg(args, 0, USAGE);
        String saslBootstrap = Conformance.arg(args, 1, USAGE);
        String prefix = Conformance.arg(args, 2, USAGE);
        String plainPassword = Conformance.arg(args, 3, USAGE);
        truststorePem = args.length > 4 ? args[4] : null;
        System.out.println("SASL clients over " + (truststorePem == null ? "SASL_PLAINTEXT" : "SASL_SSL"));
        Properties plain = sasl(saslBootstrap, "PLAIN", "alice", plainPassword);
        Properties sha256 = sasl(saslBootstrap, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD);
        Properties sha512 = sasl(saslBootstrap, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD);
        List<Conformance.Step> steps = List.of(
                new Conformance.Step("alterUserScramCredentials: upsert SCRAM-SHA-256 and SCRAM-SHA-512",
                        () -> upsertScram(adminBootstrap)),
                new Conformance.Step("describeUserScramCredentials: mechanisms and iterations",
                        () -> describeScram(adminBootstrap)),
                new Conformance.Step("alterUserScramCredentials: too few iterations, unknown user",
                        () -> scramErrors(adminBootstrap)),
                new Conformance.Step("PLAIN: create topic, produce, consume",
                        () -> roundTrip(plain, prefix + "-plain")),
                new Conformance.Step("SCRAM-SHA-256: create topic, produce, consume",
                        () -> roundTrip(sha256, prefix + "-sha256")),
                new Conformance.Step("SCRAM-SHA-512: create topic, produce, consume",
                        () -> roundTrip(sha512, prefix + "-sha512")),
                new Conformance.Step("SCRAM-SHA-256: producer keeps sending across re-authentications",
                        () -> produceAcrossReauthentication(sha256, prefix + "-reauth")),
                new Conformance.Step("wrong password: SaslAuthenticationException",
                        () -> wrongPassword(saslBootstrap)),
                new Conformance.Step("alterUserScramCredentials: delete SCRAM-SHA-512",
                        () -> deleteScram(adminBootstrap)));
        System.exit(Conformance.runSteps("SaslCheck", steps));
    }

    private static Properties sasl(String bootstrap, String mechanism, String user, String password) {
        String module = mechanism.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        if (truststorePem == null) {
            props.put("security.protocol", "SASL_PLAINTEXT");
        } else {
            props.put("security.protocol", "SASL_SSL");
            props.put("ssl.truststore.type", "PEM");
            props.put("ssl.truststore.location", truststorePem);
        }
        props.put("sasl.mechanism", mechanism);
        props.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + password + "\";");
        return props;
    }

    private static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        return Admin.create(props);
    }

    private static void upsertScram(String bootstrap) {
        try (Admin admin = admin(bootstrap)) {
            Conformance.await(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion(SCRAM_USER,
                            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), SCRAM_PASSWORD),
                    new UserScramCredentialUpsertion(SCRAM_USER,
                            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), SCRAM_PASSWORD))).all(),
                    "alterUserScramCredentials");
        }
    }

    private static void describeScram(String bootstrap) {
        try (Admin admin = admin(bootstrap)) {
            Map<String, UserScramCredentialsDescription> all = Conformance.await(
                    admin.describeUserScramCredentials().all(), "describeUserScramCredentials()");
            Conformance.check(all.containsKey(SCRAM_USER), "%s missing from %s", SCRAM_USER, all.keySet());
            UserScramCredentialsDescription one = Conformance.await(
                    admin.describeUserScramCredentials(List.of(SCRAM_USER)).description(SCRAM_USER),
                    "describeUserScramCredentials(" + SCRAM_USER + ")");
            List<String> infos = new ArrayList<>();
            for (ScramCredentialInfo info : one.credentialInfos()) {
                infos.add(info.mechanism() + "/" + info.iterations());
            }
            infos.sort(null);
            Conformance.checkEquals(List.of("SCRAM_SHA_256/4096", "SCRAM_SHA_512/8192"), infos, "credential infos");
        }
    }

    private static void scramErrors(String bootstrap) {
        try (Admin admin = admin(bootstrap)) {
            Conformance.awaitFailure(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    "java-few", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), "pw"))).all(),
                    UnacceptableCredentialException.class, "upsert with 1000 iterations");
            Conformance.awaitFailure(admin.describeUserScramCredentials(List.of("java-nobody")).description("java-nobody"),
                    ResourceNotFoundException.class, "describe an unknown user");
        }
    }

    private static void deleteScram(String bootstrap) {
        try (Admin admin = admin(bootstrap)) {
            Conformance.await(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(SCRAM_USER, ScramMechanism.SCRAM_SHA_512))).all(),
                    "delete SCRAM-SHA-512");
            UserScramCredentialsDescription one = Conformance.await(
                    admin.describeUserScramCredentials(List.of(SCRAM_USER)).description(SCRAM_USER), "describe");
            Conformance.checkEquals(1, one.credentialInfos().size(), "credentials left");
            Conformance.awaitFailure(admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(SCRAM_USER, ScramMechanism.SCRAM_SHA_512))).all(),
                    ResourceNotFoundException.class, "delete it again");
        }
    }

    private static void roundTrip(Properties base, String topic) throws Exception {
        try (Admin admin = Admin.create(base)) {
            Conformance.await(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all(),
                    "createTopics(" + topic + ")");
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(base))) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < COUNT; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, 0, null, value(i))));
            }
            for (int i = 0; i < COUNT; i++) {
                Conformance.checkEquals((long) i, acks.get(i).get(30, TimeUnit.SECONDS).offset(), "offset of " + i);
            }
        }
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
            while (seen < COUNT) {
                Conformance.check(System.nanoTime() < deadline, "read only %d of %d records", seen, COUNT);
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
                    Conformance.checkEquals(new String(value(seen), StandardCharsets.UTF_8),
                            new String(record.value(), StandardCharsets.UTF_8), "value at offset " + seen);
                    seen++;
                }
            }
        }
    }

    /** The broker's session lifetime is short (connections.max.reauth.ms): every send must still succeed. */
    private static void produceAcrossReauthentication(Properties base, String topic) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(base))) {
            long end = System.nanoTime() + Duration.ofSeconds(6).toNanos();
            int i = 0;
            while (System.nanoTime() < end) {
                producer.send(new ProducerRecord<>(topic, value(i))).get(30, TimeUnit.SECONDS);
                i++;
                Thread.sleep(100);
            }
            System.out.println("sent " + i + " records one by one over 6 s");
        }
    }

    private static void wrongPassword(String bootstrap) throws Exception {
        Properties props = producerProps(sasl(bootstrap, "SCRAM-SHA-256", SCRAM_USER, "not-the-password"));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.send(new ProducerRecord<>("never", value(0))).get(20, TimeUnit.SECONDS);
            Conformance.check(false, "a producer with a wrong password sent a record");
        } catch (ExecutionException | SaslAuthenticationException e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            Conformance.check(cause instanceof SaslAuthenticationException, "expected SaslAuthenticationException, got %s",
                    Conformance.describe(cause));
            Conformance.check(!cause.getMessage().contains("not-the-password"), "the password is in the error");
        }
    }

    private static Properties producerProps(Properties base) {
        Properties props = new Properties();
        props.putAll(base);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }

    private static byte[] value(int i) {
        return ("sasl-check-" + i + "-" + "y".repeat(i % 500)).getBytes(StandardCharsets.UTF_8);
    }
}
