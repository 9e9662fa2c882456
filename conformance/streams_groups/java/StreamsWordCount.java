import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * One instance of a Kafka Streams word count, exactly_once_v2: keyed sentences are split into
 * words, grouped by word (a repartition topic), counted (a store with its changelog topic), and the
 * running counts written to the output topic.
 *
 * Usage: StreamsWordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR INSTANCE GROUP_PROTOCOL
 * (GROUP_PROTOCOL is "streams" or "classic").
 *
 * Prints JSON lines on stdout for the harness: {"event":"state",...} on every state change and
 * {"event":"tasks",...} whenever the tasks this instance holds (active, standby) change; runs until
 * SIGTERM (its shutdown hook closes the app) or an error.
 */
public final class StreamsWordCount {
    private static final Object OUT = new Object();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3], stateDir = args[4];
        String instance = args[5], protocol = args[6];
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
               .flatMapValues(sentence -> Arrays.asList(sentence.toLowerCase(Locale.ROOT).split("\\s+")))
               .filter((key, word) -> !word.isEmpty())
               .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
               .count(Materialized.as("word-counts"))
               .toStream()
               .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, applicationId + "-" + instance);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // Classic protocol only (the streams protocol takes these from the broker's group configs):
        // a quick expiry of a killed member, as the streams runs get from group.streams.session.timeout.ms.
        if (protocol.equals("classic")) {
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            emit("{\"event\":\"state\",\"instance\":\"" + instance + "\",\"state\":\"" + now + "\",\"before\":\""
                 + before + "\",\"ts\":" + System.currentTimeMillis() + "}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            synchronized (OUT) {
                System.out.println("UNCAUGHT " + exception);
                exception.printStackTrace(System.out);
                System.out.flush();
            }
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(10));
            done.countDown();
        }));
        streams.start();
        String last = null;
        while (!done.await(200, java.util.concurrent.TimeUnit.MILLISECONDS)) {
            String tasks;
            try {
                tasks = tasks(streams);
            } catch (RuntimeException notRunning) {  // metadata is only there while the app runs
                continue;
            }
            if (!tasks.equals(last)) {
                last = tasks;
                emit("{\"event\":\"tasks\",\"instance\":\"" + instance + "\",\"state\":\"" + streams.state() + "\","
                     + tasks + ",\"ts\":" + System.currentTimeMillis() + "}");
            }
        }
        streams.close(Duration.ofSeconds(10));
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }

    /** "active":[...],"standby":[...] of this instance's threads, task ids sorted ("0_3"). */
    private static String tasks(KafkaStreams streams) {
        List<String> active = new ArrayList<>(), standby = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                active.add(task.taskId().toString());
            }
            for (TaskMetadata task : thread.standbyTasks()) {
                standby.add(task.taskId().toString());
            }
        }
        Collections.sort(active);
        Collections.sort(standby);
        return "\"active\":" + json(active) + ",\"standby\":" + json(standby);
    }

    private static String json(List<String> items) {
        StringBuilder text = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) {
            text.append(i == 0 ? "\"" : ",\"").append(items.get(i)).append('"');
        }
        return text.append(']').toString();
    }

    private static void emit(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
