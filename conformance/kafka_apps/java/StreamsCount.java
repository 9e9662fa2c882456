import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams app, exactly-once (exactly_once_v2): counts the input's values, so the records
 * go through a repartition topic (grouped by value) and a count store with its changelog topic,
 * and writes each value's running count to the output topic.
 *
 * Usage: StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR. Prints "STATE <new state>"
 * on every state change; runs until SIGTERM (its shutdown hook closes the app) or an error.
 */
public final class StreamsCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3], stateDir = args[4];
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
               .groupBy((key, value) -> value, Grouped.with("by-value", Serdes.String(), Serdes.String()))
               .count(Materialized.as("counts"))
               .toStream()
               .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            System.out.println("UNCAUGHT " + exception);
            exception.printStackTrace(System.out);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(10));
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(10));
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
