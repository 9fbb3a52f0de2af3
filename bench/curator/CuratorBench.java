/*
 * Load program for Apache Curator's ZooKeeper lock recipes (InterProcessMutex and
 * InterProcessReadWriteLock), driven over a line protocol on stdin/stdout like the other bench
 * load processes:
 *
 *   stdout  {"event":"ready"}                       after connecting and warming up
 *   stdin   go                                      starts the measured phase
 *   stdout  {"event":"done","result":{...}}         then exit 0
 *   stdout  {"event":"error","message":"..."}       then exit 1 (at any point)
 *
 * stdout is the protocol channel and nothing else may write to it: the protocol stream is taken
 * from the real stdout before System.out is pointed at stderr, and the classpath built by
 * build.sh carries the SLF4J no-op binding, so Curator and ZooKeeper log nothing.
 *
 * All clients run in this one JVM as threads sharing one CuratorFramework (= one ZooKeeper
 * session); each client thread owns its own lock object (InterProcessMutex instances track their
 * owner thread, so they are never shared between clients).
 *
 * Build and run: see build.sh next to this file.
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorBench {

  private static final String ROOT = "/bench-curator";
  private static final int CONNECTION_TIMEOUT_MS = 15_000;

  /** The protocol channel: the process's real stdout. Set up first thing in main(). */
  private static PrintStream protocol;

  /** Thrown for anything that should end the run with an error event (bad flags, etc.). */
  static final class BenchException extends Exception {
    private static final long serialVersionUID = 1L;

    BenchException(String message) {
      super(message);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Options

  enum Workload { U, H, P, RW }

  static final class Options {
    String zookeeper;
    Workload workload;
    String prefix;
    int cycles = 2000;
    int warmup = 200;
    Integer clients; // default depends on the workload
    int readers = 16;
    int writers = 2;
    long durationMs = 10_000;
    long warmupMs = 1_000;
    int sessionTimeoutMs = 10_000;

    int clientCount() {
      if (clients != null) return clients;
      return workload == Workload.P ? 64 : 32;
    }
  }

  static Options parseArgs(String[] args) throws BenchException {
    Map<String, String> raw = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || a.length() == 2) throw new BenchException("unexpected argument: " + a);
      String key;
      String value;
      int eq = a.indexOf('=');
      if (eq >= 0) {
        key = a.substring(2, eq);
        value = a.substring(eq + 1);
      } else {
        key = a.substring(2);
        if (i + 1 >= args.length) throw new BenchException("missing value for --" + key);
        value = args[++i];
      }
      if (raw.put(key, value) != null) throw new BenchException("--" + key + " given twice");
    }

    Options o = new Options();
    for (Map.Entry<String, String> e : raw.entrySet()) {
      String k = e.getKey();
      String v = e.getValue();
      switch (k) {
        case "zookeeper":
          o.zookeeper = v;
          break;
        case "workload":
          try {
            o.workload = Workload.valueOf(v.toUpperCase(Locale.ROOT));
          } catch (IllegalArgumentException ex) {
            throw new BenchException("--workload must be one of U, H, P, RW (got " + v + ")");
          }
          break;
        case "prefix":
          o.prefix = v;
          break;
        case "cycles":
          o.cycles = intFlag(k, v, 1);
          break;
        case "warmup":
          o.warmup = intFlag(k, v, 0);
          break;
        case "clients":
          o.clients = intFlag(k, v, 1);
          break;
        case "readers":
          o.readers = intFlag(k, v, 0);
          break;
        case "writers":
          o.writers = intFlag(k, v, 0);
          break;
        case "duration-ms":
          o.durationMs = intFlag(k, v, 1);
          break;
        case "warmup-ms":
          o.warmupMs = intFlag(k, v, 0);
          break;
        case "session-timeout-ms":
          o.sessionTimeoutMs = intFlag(k, v, 1);
          break;
        default:
          throw new BenchException("unknown option --" + k);
      }
    }
    if (o.zookeeper == null || o.zookeeper.isEmpty()) throw new BenchException("--zookeeper is required");
    if (o.workload == null) throw new BenchException("--workload is required (U, H, P or RW)");
    if (o.prefix == null || o.prefix.isEmpty()) throw new BenchException("--prefix is required");
    if (o.prefix.indexOf('/') >= 0) throw new BenchException("--prefix must not contain '/'");
    if (o.workload == Workload.RW && o.readers + o.writers == 0) {
      throw new BenchException("--readers + --writers must be at least 1");
    }
    return o;
  }

  static int intFlag(String key, String value, int min) throws BenchException {
    int n;
    try {
      n = Integer.parseInt(value.trim());
    } catch (NumberFormatException ex) {
      throw new BenchException("--" + key + " must be an integer (got " + value + ")");
    }
    if (n < min) throw new BenchException("--" + key + " must be >= " + min + " (got " + value + ")");
    return n;
  }

  // ---------------------------------------------------------------------------------------------
  // Samples and statistics

  /** Growable primitive long list (one per client thread, so no synchronisation). */
  static final class LongList {
    long[] a = new long[1024];
    int n;

    void add(long v) {
      if (n == a.length) a = Arrays.copyOf(a, a.length * 2);
      a[n++] = v;
    }
  }

  /** Nearest rank: sorted[ceil(p/100*n)-1]; p is an integer percentile, n > 0. */
  static long percentile(long[] sorted, int p) {
    int n = sorted.length;
    long rank = ((long) p * n + 99) / 100; // ceil(p*n/100) in exact integer arithmetic
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[(int) (rank - 1)];
  }

  static String ms3(long nanos) {
    return String.format(Locale.ROOT, "%.3f", nanos / 1e6);
  }

  static long processCpuNanos() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      long t = ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
      if (t >= 0) return t;
    }
    return -1;
  }

  // ---------------------------------------------------------------------------------------------
  // Clients (H, P, RW)

  enum Sample { NONE, WAIT, CYCLE }

  /** Shared state of one multi-client run. */
  static final class Run {
    final AtomicReference<Throwable> failure = new AtomicReference<>();
    volatile boolean stop;

    void fail(Throwable t) {
      failure.compareAndSet(null, t);
      stop = true;
    }
  }

  static final class Client {
    final String name;
    final InterProcessLock lock;
    final Sample sample;
    final boolean writer;
    // Filled by the measured phase (read by main after the done latch).
    long inWindow;
    long all;
    final LongList samples = new LongList();

    Client(String name, InterProcessLock lock, Sample sample, boolean writer) {
      this.name = name;
      this.lock = lock;
      this.sample = sample;
      this.writer = writer;
    }

    /**
     * Cycles until durNs has passed since t0 (no new cycle starts after that). An acquisition
     * counts toward the window if it was granted at or before t0 + durNs.
     */
    void loop(Run run, long t0, long durNs, boolean measure) throws Exception {
      while (!run.stop && System.nanoTime() - t0 < durNs) {
        long start = System.nanoTime();
        lock.acquire();
        long held = System.nanoTime();
        lock.release();
        long end = System.nanoTime();
        if (!measure) continue;
        all++;
        if (held - t0 <= durNs) {
          inWindow++;
          if (sample == Sample.WAIT) samples.add(held - start);
          else if (sample == Sample.CYCLE) samples.add(end - start);
        }
      }
    }
  }

  static void awaitOrFailure(CountDownLatch latch, Run run) throws Throwable {
    while (!latch.await(50, TimeUnit.MILLISECONDS)) {
      Throwable t = run.failure.get();
      if (t != null) throw t;
    }
    Throwable t = run.failure.get();
    if (t != null) throw t;
  }

  static String readGo() throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line = in.readLine();
    if (line == null) throw new BenchException("stdin closed before 'go'");
    if (!line.trim().equals("go")) throw new BenchException("expected 'go' on stdin, got: " + line);
    return line;
  }

  static void emit(String line) {
    protocol.print(line);
    protocol.print('\n');
    protocol.flush();
  }

  // ---------------------------------------------------------------------------------------------
  // Workloads

  static String runUncontended(CuratorFramework cf, Options o, String base) throws Exception {
    InterProcessMutex m = new InterProcessMutex(cf, base + "/u");
    for (int i = 0; i < o.warmup; i++) {
      m.acquire();
      m.release();
    }
    emit("{\"event\":\"ready\"}");
    readGo();

    long[] samples = new long[o.cycles];
    long cpu0 = processCpuNanos();
    long t0 = System.nanoTime();
    for (int i = 0; i < o.cycles; i++) {
      long start = System.nanoTime();
      m.acquire();
      m.release();
      samples[i] = System.nanoTime() - start;
    }
    long wall = System.nanoTime() - t0;
    long cpu1 = processCpuNanos();

    Arrays.sort(samples);
    StringBuilder r = new StringBuilder(256);
    r.append("{\"workload\":\"U\"");
    r.append(",\"durationMs\":").append(ms3(wall));
    r.append(",\"acquisitions\":").append(o.cycles);
    r.append(",\"allAcquisitions\":").append(o.cycles);
    r.append(",\"reads\":0,\"writes\":0");
    r.append(",\"latencyMs\":{\"p50\":").append(ms3(percentile(samples, 50)));
    r.append(",\"p99\":").append(ms3(percentile(samples, 99))).append('}');
    r.append(",\"cpuMicros\":").append(cpuMicros(cpu0, cpu1));
    r.append('}');
    return r.toString();
  }

  static long cpuMicros(long cpu0, long cpu1) {
    if (cpu0 < 0 || cpu1 < 0) return 0; // unavailable on this JVM; never reached on HotSpot/Linux
    return (cpu1 - cpu0) / 1000;
  }

  static String runClients(CuratorFramework cf, Options o, String base) throws Throwable {
    List<Client> clients = new ArrayList<>();
    switch (o.workload) {
      case H: {
        for (int i = 0; i < o.clientCount(); i++) {
          clients.add(new Client("h-" + i, new InterProcessMutex(cf, base + "/h"), Sample.WAIT, false));
        }
        break;
      }
      case P: {
        for (int i = 0; i < o.clientCount(); i++) {
          clients.add(new Client("p-" + i, new InterProcessMutex(cf, base + "/p-" + i), Sample.CYCLE, false));
        }
        break;
      }
      case RW: {
        for (int i = 0; i < o.readers; i++) {
          InterProcessReadWriteLock rw = new InterProcessReadWriteLock(cf, base + "/rw");
          clients.add(new Client("r-" + i, rw.readLock(), Sample.NONE, false));
        }
        for (int i = 0; i < o.writers; i++) {
          InterProcessReadWriteLock rw = new InterProcessReadWriteLock(cf, base + "/rw");
          clients.add(new Client("w-" + i, rw.writeLock(), Sample.WAIT, true));
        }
        break;
      }
      default:
        throw new IllegalStateException("not a multi-client workload: " + o.workload);
    }

    final int n = clients.size();
    final Run run = new Run();
    final CountDownLatch warmDone = new CountDownLatch(n);
    final CountDownLatch go = new CountDownLatch(1);
    final CountDownLatch measureDone = new CountDownLatch(n);
    final long warmNs = TimeUnit.MILLISECONDS.toNanos(o.warmupMs);
    final long durNs = TimeUnit.MILLISECONDS.toNanos(o.durationMs);
    final long[] goT0 = new long[1]; // written before go.countDown(), read after go.await()

    final long warmT0 = System.nanoTime();
    for (Client c : clients) {
      Thread t = new Thread(() -> {
        try {
          c.loop(run, warmT0, warmNs, false);
        } catch (Throwable e) {
          run.fail(e);
        } finally {
          warmDone.countDown();
        }
        try {
          go.await();
          c.loop(run, goT0[0], durNs, true);
        } catch (Throwable e) {
          run.fail(e);
        } finally {
          measureDone.countDown();
        }
      }, "client-" + c.name);
      t.setDaemon(true);
      t.start();
    }

    // Warm-up: every client ran the workload for --warmup-ms and is now idle (parked on `go`).
    awaitOrFailure(warmDone, run);
    emit("{\"event\":\"ready\"}");
    readGo();

    long cpu0 = processCpuNanos();
    goT0[0] = System.nanoTime();
    go.countDown();
    awaitOrFailure(measureDone, run);
    long cpu1 = processCpuNanos();

    long acquisitions = 0;
    long all = 0;
    long reads = 0;
    long writes = 0;
    long min = Long.MAX_VALUE;
    long max = Long.MIN_VALUE;
    int sampleCount = 0;
    for (Client c : clients) {
      acquisitions += c.inWindow;
      all += c.all;
      if (o.workload == Workload.RW) {
        if (c.writer) writes += c.inWindow;
        else reads += c.inWindow;
      }
      min = Math.min(min, c.inWindow);
      max = Math.max(max, c.inWindow);
      sampleCount += c.samples.n;
    }
    long[] samples = new long[sampleCount];
    int k = 0;
    for (Client c : clients) {
      System.arraycopy(c.samples.a, 0, samples, k, c.samples.n);
      k += c.samples.n;
    }
    Arrays.sort(samples);

    StringBuilder r = new StringBuilder(320);
    r.append("{\"workload\":\"").append(o.workload.name()).append('"');
    r.append(",\"durationMs\":").append(o.durationMs);
    r.append(",\"acquisitions\":").append(acquisitions);
    r.append(",\"allAcquisitions\":").append(all);
    r.append(",\"reads\":").append(reads);
    r.append(",\"writes\":").append(writes);
    // No samples (e.g. RW with --writers 0): report 0 rather than a non-number.
    r.append(",\"latencyMs\":{\"p50\":").append(samples.length == 0 ? "0.000" : ms3(percentile(samples, 50)));
    r.append(",\"p99\":").append(samples.length == 0 ? "0.000" : ms3(percentile(samples, 99))).append('}');
    r.append(",\"perClient\":{\"min\":").append(min).append(",\"max\":").append(max).append('}');
    r.append(",\"cpuMicros\":").append(cpuMicros(cpu0, cpu1));
    r.append('}');
    return r.toString();
  }

  // ---------------------------------------------------------------------------------------------
  // main

  static String jsonString(String s) {
    StringBuilder b = new StringBuilder(s.length() + 2);
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          b.append("\\\"");
          break;
        case '\\':
          b.append("\\\\");
          break;
        case '\n':
          b.append("\\n");
          break;
        case '\r':
          b.append("\\r");
          break;
        case '\t':
          b.append("\\t");
          break;
        default:
          if (c < 0x20 || c == 0x2028 || c == 0x2029) b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          else b.append(c);
      }
    }
    return b.append('"').toString();
  }

  static String describe(Throwable t) {
    if (t instanceof BenchException) return t.getMessage();
    StringBuilder b = new StringBuilder();
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (b.length() > 0) b.append(" <- caused by ");
      b.append(c.getClass().getName());
      if (c.getMessage() != null) b.append(": ").append(c.getMessage());
    }
    return b.toString();
  }

  public static void main(String[] args) {
    // Take the real stdout for the protocol; anything else printing via System.out goes to stderr.
    protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    System.setOut(System.err);

    CuratorFramework cf = null;
    String result;
    try {
      Options o = parseArgs(args);
      String base = ROOT + "/" + o.prefix;

      cf = CuratorFrameworkFactory.builder()
          .connectString(o.zookeeper)
          .sessionTimeoutMs(o.sessionTimeoutMs)
          .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
          .retryPolicy(new ExponentialBackoffRetry(100, 3))
          .build();
      final AtomicReference<ConnectionState> lost = new AtomicReference<>();
      cf.getConnectionStateListenable().addListener((client, state) -> {
        if (state == ConnectionState.LOST) lost.compareAndSet(null, state);
      });
      cf.start();
      if (!cf.blockUntilConnected(CONNECTION_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
        throw new BenchException("could not connect to ZooKeeper at " + o.zookeeper + " within "
            + CONNECTION_TIMEOUT_MS + " ms");
      }

      result = o.workload == Workload.U ? runUncontended(cf, o, base) : runClients(cf, o, base);
      if (lost.get() != null) {
        throw new BenchException("the ZooKeeper session was lost during the run; results discarded");
      }
    } catch (Throwable t) {
      if (cf != null) closeQuietly(cf);
      emit("{\"event\":\"error\",\"message\":" + jsonString(describe(t)) + "}");
      System.exit(1);
      return;
    }
    closeQuietly(cf);
    emit("{\"event\":\"done\",\"result\":" + result + "}");
    System.exit(0);
  }

  static void closeQuietly(CuratorFramework cf) {
    try {
      cf.close();
    } catch (Throwable ignored) {
      // closing is best effort; the process exits right after
    }
  }
}
