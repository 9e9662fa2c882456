import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.utils.Utils;

/**
 * The deterministic set of records the producer writes and the consumer expects back.
 *
 * Both programs rebuild the same plan from (partitions, count), so the consumer can check
 * every byte without any file passed between processes. The plan mixes the shapes brokers get
 * wrong: null and empty keys and values, a value near 100 KiB, no/one/several headers
 * (duplicate header keys, a null header value, a non-ASCII header key), and explicit
 * create-time timestamps.
 */
final class RecordPlan {
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;
    static final int LARGE_VALUE_BYTES = 100 * 1024 - 17;

    /** One planned record and where it must land. */
    record PlannedRecord(
            int index,
            Integer explicitPartition,
            int partition,
            byte[] key,
            byte[] value,
            List<Header> headers,
            long timestamp) {}

    final int partitions;
    final int count;
    private final List<PlannedRecord> records;

    RecordPlan(int partitions, int count) {
        this.partitions = partitions;
        this.count = count;
        this.records = new ArrayList<>(count);
        for (int index = 0; index < count; index++) {
            records.add(plan(index));
        }
    }

    List<PlannedRecord> all() {
        return records;
    }

    /** Records of one partition in the order the broker must assign them offsets 0, 1, 2, ... */
    List<List<PlannedRecord>> byPartition() {
        List<List<PlannedRecord>> result = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            result.add(new ArrayList<>());
        }
        for (PlannedRecord record : records) {
            result.get(record.partition()).add(record);
        }
        return result;
    }

    private PlannedRecord plan(int index) {
        SplittableRandom random = new SplittableRandom(0x6b61666b61L + index);
        byte[] key = switch (index % 7) {
            case 3 -> null;
            case 5 -> new byte[0];
            default -> ("key-" + index).getBytes(StandardCharsets.UTF_8);
        };
        byte[] value;
        if (index == count / 2) {
            value = randomBytes(random, LARGE_VALUE_BYTES);
        } else if (index % 11 == 0) {
            value = null;
        } else if (index % 13 == 1) {
            value = new byte[0];
        } else {
            value = randomBytes(random, random.nextInt(1, 400));
        }
        List<Header> headers = new ArrayList<>();
        switch (index % 3) {
            case 1 -> headers.add(new RecordHeader("trace", randomBytes(random, 16)));
            case 2 -> {
                headers.add(new RecordHeader("dup", "first".getBytes(StandardCharsets.UTF_8)));
                headers.add(new RecordHeader("dup", "second".getBytes(StandardCharsets.UTF_8)));
                headers.add(new RecordHeader("nullable", (byte[]) null));
                headers.add(new RecordHeader("ключ-ü", new byte[] {0, (byte) 0xff, 0x7f, (byte) 0x80}));
            }
            default -> { }
        }
        // Null keys would go to the sticky partitioner (unpredictable), so they get an explicit
        // partition; keyed records use the client's default murmur2 partitioning.
        Integer explicitPartition = key == null ? index % partitions : null;
        int partition = key == null ? explicitPartition : Utils.toPositive(Utils.murmur2(key)) % partitions;
        return new PlannedRecord(index, explicitPartition, partition, key, value, headers, BASE_TIMESTAMP + index);
    }

    private static byte[] randomBytes(SplittableRandom random, int length) {
        byte[] bytes = new byte[length];
        random.nextBytes(bytes);
        return bytes;
    }

    /** Return null when the headers match byte for byte, else a description of the first difference. */
    static String headerMismatch(List<Header> expected, Header[] actual) {
        if (expected.size() != actual.length) {
            return "expected " + expected.size() + " headers but got " + actual.length;
        }
        for (int i = 0; i < actual.length; i++) {
            Header want = expected.get(i);
            Header got = actual[i];
            if (!want.key().equals(got.key())) {
                return "header " + i + " key: expected '" + want.key() + "' got '" + got.key() + "'";
            }
            if (!Arrays.equals(want.value(), got.value())) {
                return "header " + i + " (" + want.key() + ") value: expected " + Conformance.hex(want.value())
                        + " got " + Conformance.hex(got.value());
            }
        }
        return null;
    }
}
