import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.common.KafkaFuture;

/**
 * Shared checking helpers for the Java-client conformance programs.
 *
 * Each program runs named steps; a failing step prints "FAIL step: why" and the program exits 1
 * after running the remaining steps, so one run shows every broken behaviour at once.
 */
final class Conformance {
    /** How long any single client call may take before the check counts as failed. */
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(30);

    private Conformance() {}

    /** A failed expectation: the message says what the broker did and what Kafka does. */
    static final class CheckFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CheckFailed(String message) {
            super(message);
        }

        CheckFailed(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** One named unit of checking; later steps may rely on state set up by earlier ones. */
    interface StepBody {
        void run() throws Exception;
    }

    record Step(String name, StepBody body) {}

    static void check(boolean condition, String format, Object... args) {
        if (!condition) {
            throw new CheckFailed(String.format(format, args));
        }
    }

    static void checkEquals(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new CheckFailed(what + ": expected <" + expected + "> but got <" + actual + ">");
        }
    }

    /** Wait for a client future, turning its failure or a timeout into a readable CheckFailed. */
    static <T> T await(KafkaFuture<T> future, String what) {
        try {
            return future.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException error) {
            Throwable cause = error.getCause() == null ? error : error.getCause();
            throw new CheckFailed(what + " failed: " + describe(cause), cause);
        } catch (TimeoutException error) {
            throw new CheckFailed(what + " did not complete within " + CALL_TIMEOUT.toSeconds() + " s");
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw new CheckFailed(what + " was interrupted");
        }
    }

    /** Expect a client future to fail with exactly the Kafka exception type Kafka's broker causes. */
    static void awaitFailure(KafkaFuture<?> future, Class<? extends Throwable> expected, String what) {
        Object value;
        try {
            value = future.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException error) {
            Throwable cause = error.getCause() == null ? error : error.getCause();
            if (!expected.isInstance(cause)) {
                throw new CheckFailed(what + ": expected " + expected.getSimpleName() + " but got "
                        + describe(cause), cause);
            }
            return;
        } catch (TimeoutException error) {
            throw new CheckFailed(what + ": expected " + expected.getSimpleName()
                    + " but the call did not complete within " + CALL_TIMEOUT.toSeconds() + " s");
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw new CheckFailed(what + " was interrupted");
        }
        throw new CheckFailed(what + ": expected " + expected.getSimpleName() + " but the call succeeded with "
                + value);
    }

    static String describe(Throwable error) {
        return error.getClass().getSimpleName() + ": " + error.getMessage();
    }

    static String hex(byte[] bytes) {
        if (bytes == null) {
            return "null";
        }
        String text = HexFormat.of().formatHex(bytes, 0, Math.min(bytes.length, 32));
        return bytes.length > 32 ? text + "...(" + bytes.length + " bytes)" : text;
    }

    /** Run every step, print PASS/FAIL per step, and return the process exit status. */
    static int runSteps(String program, List<Step> steps) {
        List<String> failures = new ArrayList<>();
        for (Step step : steps) {
            long started = System.nanoTime();
            try {
                step.body().run();
                System.out.printf("PASS %s (%d ms)%n", step.name(), (System.nanoTime() - started) / 1_000_000);
            } catch (CheckFailed failure) {
                failures.add(step.name());
                System.out.printf("FAIL %s: %s%n", step.name(), failure.getMessage());
            } catch (Exception | AssertionError error) {
                failures.add(step.name());
                System.out.printf("FAIL %s: unexpected %s%n", step.name(), describe(error));
                error.printStackTrace(System.out);
            }
            System.out.flush();
        }
        if (failures.isEmpty()) {
            System.out.printf("%s: all %d steps passed%n", program, steps.size());
            return 0;
        }
        System.out.printf("%s: %d of %d steps failed: %s%n", program, failures.size(), steps.size(), failures);
        return 1;
    }

    /** Return positional argument {@code index}, or print the usage and exit 2 when it is missing. */
    static String arg(String[] args, int index, String usage) {
        if (index >= args.length) {
            System.err.println("usage: " + usage);
            System.exit(2);
        }
        return args[index];
    }
}
