import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;

/**
 * Runs several Kafka command-line tools, one after another, in one JVM (one JVM start and one
 * class-loading warm-up for a whole scenario instead of one per tool run).
 *
 * Usage: ToolBatch COMMANDS_FILE RESULT_DIR. Each line of COMMANDS_FILE is one tool run: its main
 * class and arguments separated by tabs. For run i the tool's stdout and stderr go to
 * RESULT_DIR/i.out and i.err, and its exit code to RESULT_DIR/i.rc: what the tool first passed to
 * Exit.exit (the JVM would have ended there, even if the tool catches the exception that stands in
 * for it here), 0 when main returned, 1 for an uncaught exception, as a JVM would.
 *
 * Kafka's Exit class is org.apache.kafka.common.utils.Exit up to 3.x and ...utils.internals.Exit
 * in 4.x; it is found by reflection so that one source serves both.
 */
public final class ToolBatch {
    /** Thrown by the exit procedure so that a tool's Exit.exit(code) ends its main(), not the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /**
     * A stream whose target changes per tool run. Installed before any tool class loads, so that
     * streams captured once (Scala's Console.out, loggers' System.err) write to the current run.
     */
    static final class Switch extends OutputStream {
        volatile OutputStream target;

        Switch(OutputStream target) {
            this.target = target;
        }

        @Override public void write(int b) { try { target.write(b); } catch (java.io.IOException e) { throw new RuntimeException(e); } }
        @Override public void write(byte[] b, int off, int len) { try { target.write(b, off, len); } catch (java.io.IOException e) { throw new RuntimeException(e); } }
        @Override public void flush() { try { target.flush(); } catch (java.io.IOException e) { throw new RuntimeException(e); } }
    }

    /** The first exit code a tool asked for during the current run, or null. */
    static volatile Integer firstExit;

    static void interceptExit() throws Exception {
        Class<?> exit;
        try {
            exit = Class.forName("org.apache.kafka.common.utils.internals.Exit");
        } catch (ClassNotFoundException e) {
            exit = Class.forName("org.apache.kafka.common.utils.Exit");
        }
        for (String setter : new String[] {"setExitProcedure", "setHaltProcedure"}) {
            Method method = null;
            for (Method m : exit.getMethods()) {
                if (m.getName().equals(setter) && m.getParameterCount() == 1) {
                    method = m;
                }
            }
            Class<?> procedure = method.getParameterTypes()[0];
            Object proxy = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure}, (self, m, a) -> {
                if (m.getDeclaringClass() == Object.class) {
                    return m.getName().equals("hashCode") ? System.identityHashCode(self)
                        : m.getName().equals("equals") ? self == a[0] : "ToolBatch exit procedure";
                }
                int code = (Integer) a[0];
                if (firstExit == null) {
                    firstExit = code;
                }
                throw new ExitCalled(code);
            });
            method.invoke(null, proxy);
        }
    }

    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        Path results = Paths.get(args[1]);
        Files.createDirectories(results);
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        Switch outSwitch = new Switch(realOut);
        Switch errSwitch = new Switch(realErr);
        System.setOut(new PrintStream(outSwitch, true, "UTF-8"));
        System.setErr(new PrintStream(errSwitch, true, "UTF-8"));
        interceptExit();
        int index = 0;
        for (String line : lines) {
            if (line.isBlank()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            String mainClass = parts[0];
            String[] toolArgs = Arrays.copyOfRange(parts, 1, parts.length);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            outSwitch.target = out;
            errSwitch.target = err;
            int rc = 0;
            firstExit = null;
            long started = System.nanoTime();
            try {
                Method main = Class.forName(mainClass).getMethod("main", String[].class);
                main.invoke(null, (Object) toolArgs);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitCalled) {
                    rc = ((ExitCalled) cause).code;
                } else {
                    rc = 1;
                    System.err.println("Exception in thread \"main\" ");
                    cause.printStackTrace(System.err);
                }
            } catch (ExitCalled e) {
                rc = e.code;
            } catch (Throwable t) {
                rc = 1;
                t.printStackTrace(System.err);
            }
            if (firstExit != null) {
                rc = firstExit;
            }
            System.out.flush();
            System.err.flush();
            outSwitch.target = realOut;
            errSwitch.target = realErr;
            Files.write(results.resolve(index + ".out"), out.toByteArray());
            Files.write(results.resolve(index + ".err"), err.toByteArray());
            Files.write(results.resolve(index + ".rc"), (rc + "\n").getBytes(StandardCharsets.UTF_8));
            realErr.printf("ToolBatch: run %d %s exited %d after %d ms%n", index, mainClass, rc,
                           (System.nanoTime() - started) / 1_000_000);
            index++;
        }
        realOut.flush();
        // Tools may leave non-daemon threads (a producer's sender); the batch is over.
        Runtime.getRuntime().halt(0);
    }
}
