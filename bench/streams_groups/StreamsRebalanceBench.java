import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.Set;

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
 * Rebalance time of a Kafka Streams application, many instances in one JVM (each KafkaStreams object
 * is its own group member with its own process id and state dir, so JVM start-up is not measured).
 *
 * Usage: StreamsRebalanceBench BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR PROTOCOL INSTANCES TASKS
 *
 * Phases, each timed until every instance is RUNNING and holds its share of the TASKS active tasks
 * exactly once (and that stays so for a second): "form" (INSTANCES start at once), "join" (one more
 * starts), "leave" (one of the first closes and leaves the group). Prints one JSON line.
 */
public final class StreamsRebalanceBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3], stateDir = args[4];
        String protocol = args[5];
        int instances = Integer.parseInt(args[6]), tasks = Integer.parseInt(args[7]);
        List<KafkaStreams> running = new ArrayList<>();
        long begin = System.nanoTime();
        for (int i = 0; i < instances; i++) {
            running.add(create(bootstrap, applicationId, input, output, stateDir + "/" + i, protocol, i));
        }
        running.forEach(KafkaStreams::start);
        long form = waitStable(running, tasks, begin);
        long joinBegin = System.nanoTime();
        KafkaStreams extra = create(bootstrap, applicationId, input, output, stateDir + "/" + instances, protocol, instances);
        running.add(extra);
        extra.start();
        long join = waitStable(running, tasks, joinBegin);
        long leaveBegin = System.nanoTime();
        KafkaStreams leaving = running.remove(0);
        leaving.close(Duration.ofSeconds(30));
        long leave = waitStable(running, tasks, leaveBegin);
        System.out.println("{\"protocol\":\"" + protocol + "\",\"instances\":" + instances + ",\"form_ms\":" + form
                           + ",\"join_ms\":" + join + ",\"leave_ms\":" + leave + "}");
        System.out.flush();
        running.parallelStream().forEach(s -> s.close(Duration.ofSeconds(30)));
        System.exit(0);
    }

    private static KafkaStreams create(String bootstrap, String applicationId, String input, String output,
                                       String stateDir, String protocol, int index) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
               .flatMapValues(sentence -> Arrays.asList(sentence.toLowerCase(Locale.ROOT).split("\\s+")))
               .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
               .count(Materialized.as("word-counts"))
               .toStream()
               .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, applicationId + "-" + index);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, "exactly_once_v2");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        if (protocol.equals("classic")) {
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        }
        return new KafkaStreams(builder.build(), props);
    }

    /** Milliseconds from `since` until the instances hold every task once, all RUNNING, for a second. */
    private static long waitStable(List<KafkaStreams> instances, int tasks, long since) throws InterruptedException {
        long deadline = System.nanoTime() + 170_000_000_000L;
        long stableAt = -1;
        while (System.nanoTime() < deadline) {
            boolean stable = stable(instances, tasks);
            long now = System.nanoTime();
            if (stable && stableAt < 0) {
                stableAt = now;
            } else if (!stable) {
                stableAt = -1;
            }
            if (stableAt > 0 && now - stableAt >= 1_000_000_000L) {
                return (stableAt - since) / 1_000_000;
            }
            Thread.sleep(20);
        }
        throw new IllegalStateException("no stable assignment within 170 s");
    }

    private static boolean stable(List<KafkaStreams> instances, int tasks) {
        Set<String> seen = new HashSet<>();
        int count = 0;
        for (KafkaStreams streams : instances) {
            if (streams.state() != KafkaStreams.State.RUNNING) {
                return false;
            }
            try {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        seen.add(task.taskId().toString());
                        count++;
                    }
                }
            } catch (RuntimeException notRunning) {
                return false;
            }
        }
        return count == tasks && seen.size() == tasks;
    }
}
