// Baseline B of ferry's benchmark (bench/README.md): Confluent's Parallel
// Consumer in KEY ordering with a no-op function, reading the benchmark topic
// from the beginning in a fresh consumer group, committing as it goes
// (PERIODIC_CONSUMER_ASYNCHRONOUS, Parallel Consumer's default).
//
//   java -cp 'bench/java/target/ferry-bench-baseline-b.jar:bench/java/target/lib/*' \
//       dev.ferry.bench.ParallelConsumerBench --bootstrap B --topic T --count N
//       [--concurrency 16] [--ordering KEY|PARTITION|UNORDERED] [--timeout_s 600]
//
// Stops once N records were processed and prints one JSON line:
//   {"events":N,"seconds":S,"rate":R,"cpu_s":C,"peak_rss_kib":K,"concurrency":..,"ordering":..}
// seconds: from the first processed record to the last; cpu_s: the JVM's CPU
// time over its whole life (JIT and GC included).
package dev.ferry.bench;

import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class ParallelConsumerBench {
  public static void main(String[] args) throws Exception {
    String bootstrap = null;
    String topic = null;
    long count = 0;
    int concurrency = 16;
    String ordering = "KEY";
    long timeoutSeconds = 600;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--bootstrap" -> bootstrap = args[i + 1];
        case "--topic" -> topic = args[i + 1];
        case "--count" -> count = Long.parseLong(args[i + 1]);
        case "--concurrency" -> concurrency = Integer.parseInt(args[i + 1]);
        case "--ordering" -> ordering = args[i + 1];
        case "--timeout_s" -> timeoutSeconds = Long.parseLong(args[i + 1]);
        default -> usage("unknown flag " + args[i]);
      }
    }
    if (bootstrap == null || topic == null || count <= 0) usage("need --bootstrap, --topic, --count");

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, "bench-b-" + System.nanoTime());
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "ferry-bench-b");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    KafkaConsumer<String, byte[]> consumer =
        new KafkaConsumer<>(props, new StringDeserializer(), new ByteArrayDeserializer());

    ParallelConsumerOptions<String, byte[]> options =
        ParallelConsumerOptions.<String, byte[]>builder()
            .ordering(ProcessingOrder.valueOf(ordering))
            .maxConcurrency(concurrency)
            .commitMode(CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
            .consumer(consumer)
            // Kafka clients 3.7+ hide the auto-commit setting from Parallel
            // Consumer's reflective check; it is off (set above).
            .ignoreReflectiveAccessExceptionsForAutoCommitDisabledCheck(true)
            .build();
    ParallelStreamProcessor<String, byte[]> pc =
        ParallelStreamProcessor.createEosStreamProcessor(options);

    final long target = count;
    AtomicLong processed = new AtomicLong();
    AtomicLong firstNanos = new AtomicLong();
    AtomicLong lastNanos = new AtomicLong();
    CountDownLatch done = new CountDownLatch(1);
    pc.subscribe(List.of(topic));
    pc.poll(context -> {
      // The no-op function: count and return.
      long now = System.nanoTime();
      long n = processed.addAndGet(context.size());
      if (n == context.size()) firstNanos.compareAndSet(0, now);
      lastNanos.accumulateAndGet(now, Math::max);
      if (n >= target) done.countDown();
    });

    boolean finished = done.await(timeoutSeconds, TimeUnit.SECONDS);
    long events = processed.get();
    double seconds = (lastNanos.get() - firstNanos.get()) / 1e9;
    double cpu = ((com.sun.management.OperatingSystemMXBean)
        ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1e9;
    System.out.printf(
        "{\"events\":%d,\"seconds\":%.3f,\"rate\":%.0f,\"cpu_s\":%.3f,\"peak_rss_kib\":%d,"
            + "\"concurrency\":%d,\"ordering\":\"%s\"}%n",
        events, seconds, seconds > 0 ? (events - 1) / seconds : 0.0, cpu, peakRssKib(),
        concurrency, ordering);
    System.out.flush();
    pc.closeDontDrainFirst(Duration.ofSeconds(10));
    System.exit(finished ? 0 : 1);
  }

  private static long peakRssKib() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    } catch (IOException | NumberFormatException e) {
      // unknown
    }
    return -1;
  }

  private static void usage(String problem) {
    System.err.println("ParallelConsumerBench: " + problem);
    System.exit(2);
  }
}
