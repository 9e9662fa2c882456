import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka 4.x's KafkaShareConsumer (KIP-932) and Admin share-group APIs, scenario by scenario.
 *
 * Usage: ShareScenarios BOOTSTRAP PREFIX [SCENARIO...]
 *
 * Each scenario prints one JSON line {"scenario", "status", "observed", "detail"}: status is "pass",
 * "fail" (a check failed; detail says which), "error" (an exception; detail names it) or
 * "unsupported". `observed` holds only what does not depend on the broker's timing or identity
 * (sorted offsets, delivery counts, record totals, states), so that the same program's lines can be
 * compared between kafkapy and a real Kafka broker. The broker is expected to run with
 * group.share.record.lock.duration.ms=5000 (LOCK_MS) and group.initial.rebalance.delay.ms=0.
 * Compiled against kafka-clients 4.2 or newer (no reflection).
 */
public class ShareScenarios {
    static final long LOCK_MS = 5000;
    static String bootstrap;
    static String prefix;

    interface Scenario {
        void run(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception;
    }

    static final class Unsupported extends RuntimeException {
        Unsupported(String why) { super(why); }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        prefix = args[1];
        Map<String, Scenario> scenarios = new LinkedHashMap<>();
        scenarios.put("join_leave_in_flight", ShareScenarios::joinLeaveInFlight);
        scenarios.put("more_members_than_partitions", ShareScenarios::moreMembersThanPartitions);
        scenarios.put("implicit_ack", ShareScenarios::implicitAck);
        scenarios.put("explicit_ack", ShareScenarios::explicitAck);
        scenarios.put("renew", ShareScenarios::renew);
        scenarios.put("delivery_count_limit", ShareScenarios::deliveryCountLimit);
        scenarios.put("close_with_records_held", ShareScenarios::closeWithRecordsHeld);
        scenarios.put("describe_and_offsets", ShareScenarios::describeAndOffsets);
        scenarios.put("stale_epoch", ShareScenarios::staleEpoch);
        List<String> chosen = args.length > 2 ? Arrays.asList(args).subList(2, args.length) : new ArrayList<>(scenarios.keySet());
        for (String name : chosen) {
            Scenario scenario = scenarios.get(name);
            Map<String, Object> observed = new TreeMap<>();
            List<String> failures = new ArrayList<>();
            List<AutoCloseable> closeables = new ArrayList<>();
            String status;
            String detail = "";
            try {
                if (scenario == null) throw new Unsupported("no such scenario");
                scenario.run(observed, failures, closeables);
                status = failures.isEmpty() ? "pass" : "fail";
                detail = String.join("; ", failures);
            } catch (Unsupported u) {
                status = "unsupported";
                detail = u.getMessage();
            } catch (Throwable t) {
                status = "error";
                detail = describe(t);
                if (!failures.isEmpty()) detail = String.join("; ", failures) + "; " + detail;
            } finally {
                for (int i = closeables.size() - 1; i >= 0; i--) {
                    try {
                        AutoCloseable c = closeables.get(i);
                        if (c instanceof KafkaShareConsumer) ((KafkaShareConsumer<?, ?>) c).close(Duration.ofSeconds(5));
                        else if (c instanceof KafkaProducer) ((KafkaProducer<?, ?>) c).close(Duration.ofSeconds(5));
                        else if (c instanceof Admin) ((Admin) c).close(Duration.ofSeconds(5));
                        else c.close();
                    } catch (Throwable t) {
                        System.err.println("ShareScenarios: close: " + describe(t));
                    }
                }
            }
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("scenario", name);
            line.put("status", status);
            line.put("observed", observed);
            line.put("detail", detail);
            System.out.println(json(line));
            System.out.flush();
        }
    }

    // -- scenarios ---------------------------------------------------------------------------------

    /**
     * Member A reads and ACCEPTs offsets 0-9; of 10 more it takes one batch and holds it (no
     * acknowledgement) while member B joins; then A closes. B gets 10-19 once each: what A held with
     * delivery count 2, the rest with 1; nothing accepted comes back.
     */
    static void joinLeaveInFlight(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("join-leave-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "join-leave", 1, 10, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, "explicit", null);
        a.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> accepted = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 12000;
        while (accepted.size() < 10 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                accepted.add(r);
                a.acknowledge(r, AcknowledgeType.ACCEPT);
            }
        }
        observed.put("a_commit_errors", commitErrors(a.commitSync(Duration.ofSeconds(10))));
        observed.put("a_accepted", offsets(accepted).equals(range(0, 10)) ? "0-9" : offsets(accepted).toString());
        produce(closeables, topic, 0, 10, 10);
        Set<Long> held = new TreeSet<>();
        deadline = System.currentTimeMillis() + 10000;
        while (held.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) held.add(r.offset());
        }
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        drain(b, bRecords, 1000);
        Set<Long> beforeClose = new TreeSet<>(offsets(bRecords));
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        deadline = System.currentTimeMillis() + 10000;
        while (bRecords.size() < 10 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(200))) bRecords.add(r);
        }
        drain(b, bRecords, 1500);
        boolean heldBackWith2 = !held.isEmpty(), restWith1 = true;
        for (ConsumerRecord<String, String> r : bRecords) {
            int count = r.deliveryCount().orElse((short) -1);
            if (held.contains(r.offset())) heldBackWith2 &= count == 2;
            else restWith1 &= count == 1;
        }
        observed.put("b_offsets", offsets(bRecords));
        observed.put("held_came_back_with_count_2", heldBackWith2);
        observed.put("not_held_came_with_count_1", restWith1);
        observed.put("held_reached_b_before_close", !Collections.disjoint(held, beforeClose));
        check(failures, offsets(accepted).equals(range(0, 10)), "A accepted " + offsets(accepted));
        check(failures, offsets(bRecords).equals(range(10, 20)), "B got offsets " + offsets(bRecords) + ", not 10-19 once each");
        check(failures, heldBackWith2, "what A held " + held + " did not all come back to B with delivery count 2");
        check(failures, restWith1, "records A never had came to B with a delivery count other than 1");
    }

    /** Four members of one group on a 2-partition topic: the assignments they observe; each record delivered once. */
    static void moreMembersThanPartitions(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("more-members-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "more-members", 2, 40, group);
        List<KafkaShareConsumer<String, String>> members = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            KafkaShareConsumer<String, String> c = consumer(closeables, group, null, null);
            c.subscribe(List.of(topic));
            members.add(c);
        }
        List<ConsumerRecord<String, String>> all = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 12000;
        while (all.size() < 40 && System.currentTimeMillis() < deadline) {
            for (KafkaShareConsumer<String, String> c : members) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) all.add(r);
            }
        }
        // A while longer (every member polling, so that implicit acknowledgements go out): nothing more.
        long settle = System.currentTimeMillis() + 2000;
        while (System.currentTimeMillis() < settle) {
            for (KafkaShareConsumer<String, String> c : members) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) all.add(r);
            }
        }
        ShareGroupDescription description = describe(admin, group);
        List<Integer> partitionsPerMember = new ArrayList<>();
        Map<Integer, Integer> membersPerPartition = new TreeMap<>();
        for (ShareMemberDescription m : description.members()) {
            Set<TopicPartition> tps = m.assignment().topicPartitions();
            partitionsPerMember.add(tps.size());
            for (TopicPartition tp : tps) membersPerPartition.merge(tp.partition(), 1, Integer::sum);
        }
        Collections.sort(partitionsPerMember);
        observed.put("members", description.members().size());
        observed.put("state", description.groupState().toString());
        observed.put("partitions_per_member", partitionsPerMember);
        observed.put("members_per_partition", stringKeys(membersPerPartition));
        Set<String> unique = new TreeSet<>();
        for (ConsumerRecord<String, String> r : all) unique.add(r.partition() + ":" + r.offset());
        observed.put("deliveries", all.size());
        observed.put("distinct_records", unique.size());
        observed.put("delivery_counts", deliveryCounts(all));
        check(failures, all.size() == 40 && unique.size() == 40, "deliveries " + all.size() + ", distinct " + unique.size() + " (40 each expected)");
        check(failures, description.members().size() == 4, "describe shows " + description.members().size() + " members");
        for (int p = 0; p < 2; p++) {
            check(failures, membersPerPartition.getOrDefault(p, 0) >= 1, "partition " + p + " assigned to no member");
        }
    }

    /**
     * Implicit acknowledgement: a member's records are accepted by its next poll; a second member then
     * gets none of them, and a fresh consumer of the group gets only records produced later. A member
     * that closes right after a poll: whatever its close does with that batch is observed.
     */
    static void implicitAck(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("implicit-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "implicit", 1, 10, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, null, null);
        a.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> aRecords = new ArrayList<>();
        pollUntil(a, aRecords, 10, 12000);
        drain(a, aRecords, 500);  // the next poll accepts them
        observed.put("a_offsets", offsets(aRecords));
        observed.put("a_delivery_counts", deliveryCounts(aRecords));
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        drain(b, bRecords, 1500);
        produce(closeables, topic, 0, 5, 10);
        pollUntil(b, bRecords, 5, 10000);
        // The batch B got last is not followed by another poll: close() after it.
        b.close(Duration.ofSeconds(10));
        closeables.remove(b);
        observed.put("b_offsets", offsets(bRecords));
        observed.put("b_delivery_counts", deliveryCounts(bRecords));
        KafkaShareConsumer<String, String> c = consumer(closeables, group, null, null);
        c.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> cRecords = new ArrayList<>();
        drain(c, cRecords, 2500);
        observed.put("after_close_offsets", offsets(cRecords));
        observed.put("after_close_delivery_counts", deliveryCounts(cRecords));
        check(failures, offsets(aRecords).equals(range(0, 10)), "A got " + offsets(aRecords));
        check(failures, offsets(bRecords).equals(range(10, 15)), "B got " + offsets(bRecords) + ", not the 5 new records 10-14");
        check(failures, deliveryCounts(aRecords).equals(List.of(1)) && deliveryCounts(bRecords).equals(List.of(1)),
              "delivery counts A " + deliveryCounts(aRecords) + " B " + deliveryCounts(bRecords));
    }

    /** Explicit: of 30 records 0-9 ACCEPT, 10-19 RELEASE, 20-29 REJECT; only 10-19 come back, with count 2. */
    static void explicitAck(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("explicit-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "explicit", 1, 30, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, "explicit", null);
        a.subscribe(List.of(topic));
        Set<Long> first = new TreeSet<>();
        List<ConsumerRecord<String, String>> again = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 15000;
        while ((first.size() < 30 || again.size() < 10) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                if (r.deliveryCount().orElse((short) 0) == 1) {
                    first.add(r.offset());
                    a.acknowledge(r, r.offset() < 10 ? AcknowledgeType.ACCEPT : r.offset() < 20 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT);
                } else {
                    again.add(r);
                    a.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
        }
        observed.put("commit_errors", commitErrors(a.commitSync(Duration.ofSeconds(10))));
        drainExplicit(a, again, 1500);
        observed.put("first_offsets", first.size() == 30 ? "0-29" : first.toString());
        observed.put("redelivered_offsets", offsets(again));
        observed.put("redelivered_counts", deliveryCounts(again));
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        drain(b, bRecords, 2000);
        observed.put("second_member_offsets", offsets(bRecords));
        check(failures, first.size() == 30, "first deliveries " + first);
        check(failures, offsets(again).equals(range(10, 20)), "redelivered " + offsets(again) + ", not the released 10-19");
        check(failures, deliveryCounts(again).equals(List.of(2)), "redelivery counts " + deliveryCounts(again));
        check(failures, bRecords.isEmpty(), "a second member got " + offsets(bRecords));
    }

    /**
     * RENEW (KIP-1222; AcknowledgeType.RENEW in kafka-clients 4.2+): a member renews one record's lock
     * for 1.8 lock durations while another member polls; the other never gets it, its delivery count
     * stays 1, and it is returned again to the renewing member each time the renewal completes.
     */
    static void renew(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("renew-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "renew", 1, 1, group);
        Map<String, String> props = new HashMap<>();
        props.put("max.poll.records", "1");
        props.put("share.acquire.mode", "record_limit");
        KafkaShareConsumer<String, String> a = consumer(closeables, group, "explicit", props);
        a.subscribe(List.of(topic));
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        List<ConsumerRecord<String, String>> aRecords = new ArrayList<>();
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        List<String> callbackErrors = new ArrayList<>();
        a.setAcknowledgementCommitCallback((offsets, exception) -> {
            if (exception != null) callbackErrors.add(exception.getClass().getSimpleName());
        });
        long deadline = System.currentTimeMillis() + 10000;
        while (aRecords.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                aRecords.add(r);
                a.acknowledge(r, AcknowledgeType.RENEW);
            }
        }
        if (aRecords.isEmpty()) {
            failures.add("A got no record");
            return;
        }
        b.subscribe(List.of(topic));
        long holdUntil = System.currentTimeMillis() + (long) (LOCK_MS * 1.8);
        boolean accepted = false;
        deadline = holdUntil + 8000;
        while (!accepted && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                aRecords.add(r);
                if (System.currentTimeMillis() < holdUntil) {
                    a.acknowledge(r, AcknowledgeType.RENEW);
                } else {
                    a.acknowledge(r, AcknowledgeType.ACCEPT);
                    accepted = true;
                }
            }
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) bRecords.add(r);
        }
        observed.put("accept_commit_errors", commitErrors(a.commitSync(Duration.ofSeconds(10))));
        long settle = System.currentTimeMillis() + 1500;
        while (System.currentTimeMillis() < settle) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(100))) {
                aRecords.add(r);
                a.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) bRecords.add(r);
        }
        observed.put("renewing_member_offsets", new TreeSet<>(offsets(aRecords)).toString());
        observed.put("renewing_member_delivery_counts", deliveryCounts(aRecords));
        observed.put("returned_again_after_renew", aRecords.size() >= 2);
        observed.put("accepted", accepted);
        observed.put("other_member_offsets", offsets(bRecords));
        observed.put("callback_errors", new TreeSet<>(callbackErrors).toString());
        check(failures, accepted, "the renewed record was not returned again to be accepted");
        check(failures, bRecords.isEmpty(), "the other member got " + offsets(bRecords) + " while it was renewed");
        check(failures, deliveryCounts(aRecords).equals(List.of(1)), "delivery counts " + deliveryCounts(aRecords));
        check(failures, callbackErrors.isEmpty(), "acknowledgement errors " + callbackErrors);
    }

    /** share.delivery.count.limit=2 (group config): a record RELEASEd each time is delivered twice, then archived. */
    static void deliveryCountLimit(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("limit-group");
        Admin admin = admin(closeables);
        alterGroupConfig(admin, group, "share.delivery.count.limit", "2");
        String topic = topicWithRecords(admin, closeables, "limit", 1, 3, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, "explicit", null);
        a.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 12000;
        while (records.size() < 6 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                records.add(r);
                a.acknowledge(r, AcknowledgeType.RELEASE);
            }
        }
        long settle = System.currentTimeMillis() + 2000;
        while (System.currentTimeMillis() < settle) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) {
                records.add(r);
                a.acknowledge(r, AcknowledgeType.RELEASE);
            }
        }
        a.commitSync(Duration.ofSeconds(10));
        Map<Long, List<Integer>> countsByOffset = new TreeMap<>();
        for (ConsumerRecord<String, String> r : records) {
            countsByOffset.computeIfAbsent(r.offset(), k -> new ArrayList<>()).add((int) r.deliveryCount().orElse((short) -1));
        }
        observed.put("delivery_counts_by_offset", stringKeys(countsByOffset));
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        Map<TopicPartition, SharePartitionOffsetInfo> offsets = shareOffsets(admin, group);
        SharePartitionOffsetInfo info = offsets.get(new TopicPartition(topic, 0));
        observed.put("start_offset", info == null ? "none" : info.startOffset());
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        drain(b, bRecords, 2000);
        observed.put("second_member_offsets", offsets(bRecords));
        Map<Long, List<Integer>> expected = new TreeMap<>();
        for (long o = 0; o < 3; o++) expected.put(o, List.of(1, 2));
        check(failures, countsByOffset.equals(expected), "deliveries by offset " + countsByOffset + ", not [1, 2] each");
        check(failures, bRecords.isEmpty(), "archived records reached a second member: " + offsets(bRecords));
    }

    /**
     * Member A (explicit) takes one batch of a 2-partition topic and acknowledges none of it; B joins,
     * then A closes: B gets every record once, A's with delivery count 2, before A's locks would expire.
     */
    static void closeWithRecordsHeld(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("close-held-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "close-held", 2, 20, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, "explicit", null);
        a.subscribe(List.of(topic));
        Set<String> held = new TreeSet<>();
        long deadline = System.currentTimeMillis() + 12000;
        while (held.isEmpty() && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : a.poll(Duration.ofMillis(200))) held.add(r.partition() + ":" + r.offset());
        }
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        drain(b, bRecords, 1000);
        Set<String> beforeClose = keys(bRecords);
        long closedAt = System.currentTimeMillis();
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        deadline = System.currentTimeMillis() + 10000;
        long heldBackAt = -1;
        while (heldBackAt < 0 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) bRecords.add(r);
            if (keys(bRecords).containsAll(held)) heldBackAt = System.currentTimeMillis();
        }
        long rest = System.currentTimeMillis() + 8000;
        while (bRecords.size() < 20 && System.currentTimeMillis() < rest) {
            for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) bRecords.add(r);
        }
        drain(b, bRecords, 1000);
        boolean heldBackWith2 = !held.isEmpty(), restWith1 = true;
        for (ConsumerRecord<String, String> r : bRecords) {
            int count = r.deliveryCount().orElse((short) -1);
            if (held.contains(r.partition() + ":" + r.offset())) heldBackWith2 &= count == 2;
            else restWith1 &= count == 1;
        }
        boolean prompt = heldBackAt >= 0 && heldBackAt - closedAt < LOCK_MS - 1000;
        observed.put("b_distinct_records", keys(bRecords).size());
        observed.put("b_deliveries", bRecords.size());
        observed.put("held_came_back_with_count_2", heldBackWith2);
        observed.put("not_held_came_with_count_1", restWith1);
        observed.put("held_back_before_lock_expiry", prompt);
        observed.put("held_reached_b_before_close", !Collections.disjoint(held, beforeClose));
        check(failures, keys(bRecords).size() == 20 && bRecords.size() == 20,
              "B got " + bRecords.size() + " deliveries of " + keys(bRecords).size() + " records, not 20 once each");
        check(failures, heldBackWith2, "what A held did not all come back to B with delivery count 2");
        check(failures, restWith1, "records A never had came to B with a delivery count other than 1");
        check(failures, prompt, "the held records were not back within " + (LOCK_MS - 1000) + " ms of the close");
    }

    static Set<String> keys(Collection<ConsumerRecord<String, String>> records) {
        Set<String> out = new TreeSet<>();
        for (ConsumerRecord<String, String> r : records) out.add(r.partition() + ":" + r.offset());
        return out;
    }

    /** Admin describeShareGroups and list/alter/deleteShareGroupOffsets: state, members, start offset, lag. */
    static void describeAndOffsets(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) throws Exception {
        String group = name("describe-group");
        Admin admin = admin(closeables);
        String topic = topicWithRecords(admin, closeables, "describe", 2, 20, group);
        KafkaShareConsumer<String, String> a = consumer(closeables, group, null, null);
        a.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        pollUntil(a, records, 20, 12000);
        a.commitSync(Duration.ofSeconds(10));  // implicit: accepts the last batch
        ShareGroupDescription stable = describe(admin, group);
        observed.put("state_with_member", stable.groupState().toString());
        observed.put("members_with_member", stable.members().size());
        List<String> assigned = new ArrayList<>();
        for (ShareMemberDescription m : stable.members()) {
            for (TopicPartition tp : m.assignment().topicPartitions()) assigned.add(String.valueOf(tp.partition()));
        }
        Collections.sort(assigned);
        observed.put("assignment", assigned);
        produce(closeables, topic, 0, 3, 100);
        Map<String, String> consumed = waitForOffsets(admin, group, topic, "0=3,1=0", 8000);
        observed.put("lags_after_consume", part(consumed, 1));
        observed.put("start_offsets_after_consume", part(consumed, 0));
        a.close(Duration.ofSeconds(10));
        closeables.remove(a);
        ShareGroupDescription empty = describe(admin, group);
        observed.put("state_after_close", empty.groupState().toString());
        observed.put("members_after_close", empty.members().size());
        admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 0L, new TopicPartition(topic, 1), 0L))
             .all().get(10, TimeUnit.SECONDS);
        Map<String, String> reset = waitForOffsets(admin, group, topic, "0=13,1=10", 5000);
        observed.put("offsets_after_reset", reset.toString());
        admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get(10, TimeUnit.SECONDS);
        observed.put("offsets_after_delete", waitForOffsets(admin, group, topic, "", 5000).toString());
        KafkaShareConsumer<String, String> b = consumer(closeables, group, null, null);
        b.subscribe(List.of(topic));
        List<ConsumerRecord<String, String>> bRecords = new ArrayList<>();
        pollUntil(b, bRecords, 23, 12000);
        observed.put("after_delete_offsets_redelivered", bRecords.size());
        observed.put("after_delete_delivery_counts", deliveryCounts(bRecords));
        check(failures, "Stable".equals(stable.groupState().toString()), "state with a member " + stable.groupState());
        check(failures, "Empty".equals(empty.groupState().toString()), "state after close " + empty.groupState());
        check(failures, consumed.getOrDefault("0", "").endsWith("/3") && consumed.getOrDefault("1", "").endsWith("/0"),
              "offsets (start/lag) after consume " + consumed + ": lags 3 and 0 expected");
        check(failures, "{0=0/13, 1=0/10}".equals(reset.toString()), "offsets after the reset to 0: " + reset);
        check(failures, bRecords.size() == 23, "after the offsets were deleted a new member read " + bRecords.size() + " records, not 23");
    }

    /** A stale member epoch or share-session epoch cannot be produced through the client API. */
    static void staleEpoch(Map<String, Object> observed, List<String> failures, List<AutoCloseable> closeables) {
        throw new Unsupported("member and share-session epochs are internal to KafkaShareConsumer: left to the wire tests");
    }

    // -- helpers -----------------------------------------------------------------------------------

    static String name(String what) {
        return prefix + "-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin(List<AutoCloseable> closeables) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "20000");
        Admin admin = Admin.create(props);
        closeables.add(admin);
        return admin;
    }

    static void alterGroupConfig(Admin admin, String group, String key, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET))))
             .all().get(15, TimeUnit.SECONDS);
    }

    /** A topic with `count` records spread round-robin over `partitions`; `group` reads it from the earliest offset. */
    static String topicWithRecords(Admin admin, List<AutoCloseable> closeables, String what, int partitions, int count, String group) throws Exception {
        String topic = name(what);
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(15, TimeUnit.SECONDS);
        alterGroupConfig(admin, group, "share.auto.offset.reset", "earliest");
        KafkaProducer<String, String> producer = producer(closeables);
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i)).get(15, TimeUnit.SECONDS);
        }
        return topic;
    }

    static KafkaProducer<String, String> producer(List<AutoCloseable> closeables) {
        for (AutoCloseable c : closeables) {
            if (c instanceof KafkaProducer) {
                @SuppressWarnings("unchecked") KafkaProducer<String, String> p = (KafkaProducer<String, String>) c;
                return p;
            }
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("linger.ms", "0");
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        closeables.add(producer);
        return producer;
    }

    static void produce(List<AutoCloseable> closeables, String topic, int partition, int count, int from) throws Exception {
        KafkaProducer<String, String> producer = producer(closeables);
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, partition, "k" + (from + i), "v" + (from + i))).get(15, TimeUnit.SECONDS);
        }
    }

    static KafkaShareConsumer<String, String> consumer(List<AutoCloseable> closeables, String group, String ackMode, Map<String, String> extra) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", name("share-consumer"));
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        if (ackMode != null) props.put("share.acknowledgement.mode", ackMode);
        if (extra != null) props.putAll(extra);
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
        closeables.add(consumer);
        return consumer;
    }

    static void pollUntil(KafkaShareConsumer<String, String> c, List<ConsumerRecord<String, String>> into, int count, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (into.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) into.add(r);
        }
    }

    /** Poll (implicit mode) for `ms` more, collecting whatever comes. */
    static void drain(KafkaShareConsumer<String, String> c, List<ConsumerRecord<String, String>> into, long ms) {
        long until = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < until) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) into.add(r);
        }
    }

    /** Poll (explicit mode, accepting each record) for `ms` more, collecting whatever comes. */
    static void drainExplicit(KafkaShareConsumer<String, String> c, List<ConsumerRecord<String, String>> into, long ms) {
        long until = System.currentTimeMillis() + ms;
        while (System.currentTimeMillis() < until) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                into.add(r);
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
        }
    }

    static ShareGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get(15, TimeUnit.SECONDS);
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> shareOffsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, SharePartitionOffsetInfo> result =
            admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get(15, TimeUnit.SECONDS);
        return result == null ? Map.of() : result;
    }

    /**
     * "partition" -> "start/lag" of `topic` in the group's offsets, polled until the lags are
     * `expectedLags` ("0=3,1=0"; the start offset Kafka reports trails by one state write) or the time is up.
     */
    static Map<String, String> waitForOffsets(Admin admin, String group, String topic, String expectedLags, long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            Map<String, String> got = new TreeMap<>();
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : shareOffsets(admin, group).entrySet()) {
                if (!e.getKey().topic().equals(topic) || e.getValue() == null) continue;
                got.put(String.valueOf(e.getKey().partition()),
                        e.getValue().startOffset() + "/" + e.getValue().lag().map(String::valueOf).orElse("-"));
            }
            StringBuilder lags = new StringBuilder();
            for (Map.Entry<String, String> e : got.entrySet()) {
                if (lags.length() > 0) lags.append(',');
                lags.append(e.getKey()).append('=').append(e.getValue().substring(e.getValue().indexOf('/') + 1));
            }
            if (lags.toString().equals(expectedLags) || System.currentTimeMillis() >= deadline) return got;
            Thread.sleep(200);
        }
    }

    /** {"0": "10/3"} -> {"0": "10"} (part 0) or {"0": "3"} (part 1). */
    static Map<String, String> part(Map<String, String> startSlashLag, int which) {
        Map<String, String> out = new TreeMap<>();
        for (Map.Entry<String, String> e : startSlashLag.entrySet()) out.put(e.getKey(), e.getValue().split("/")[which]);
        return out;
    }

    static List<String> commitErrors(Map<TopicIdPartition, Optional<KafkaException>> result) {
        Set<String> errors = new TreeSet<>();
        for (Optional<KafkaException> e : result.values()) e.ifPresent(x -> errors.add(x.getClass().getSimpleName()));
        return new ArrayList<>(errors);
    }

    static List<Long> offsets(Collection<ConsumerRecord<String, String>> records) {
        List<Long> out = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) out.add(r.offset());
        Collections.sort(out);
        return out;
    }

    /** The distinct delivery counts seen, sorted. */
    static List<Integer> deliveryCounts(Collection<ConsumerRecord<String, String>> records) {
        Set<Integer> counts = new TreeSet<>();
        for (ConsumerRecord<String, String> r : records) counts.add((int) r.deliveryCount().orElse((short) -1));
        return new ArrayList<>(counts);
    }

    static List<Long> range(long from, long to) {
        List<Long> out = new ArrayList<>();
        for (long i = from; i < to; i++) out.add(i);
        return out;
    }

    static <K, V> Map<String, V> stringKeys(Map<K, V> map) {
        Map<String, V> out = new TreeMap<>();
        for (Map.Entry<K, V> e : map.entrySet()) out.put(String.valueOf(e.getKey()), e.getValue());
        return out;
    }

    static void check(List<String> failures, boolean ok, String message) {
        if (!ok) failures.add(message);
    }

    static String describe(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof KafkaException && t.getCause() != null
                && t.getClass() == KafkaException.class) && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getName() + ": " + t.getMessage();
    }

    // -- JSON --------------------------------------------------------------------------------------

    static String json(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        return out.toString();
    }

    static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (!first) out.append(", ");
                first = false;
                write(out, String.valueOf(e.getKey()));
                out.append(": ");
                write(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                if (!first) out.append(", ");
                first = false;
                write(out, item);
            }
            out.append(']');
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else {
            out.append('"');
            for (char ch : value.toString().toCharArray()) {
                if (ch == '"' || ch == '\\') out.append('\\').append(ch);
                else if (ch < 0x20) out.append(String.format("\\u%04x", (int) ch));
                else out.append(ch);
            }
            out.append('"');
        }
    }
}
