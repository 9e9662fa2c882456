import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka 4.4's Admin API on streams groups, one JSON line on stdout per command.
 *
 * Usage: StreamsGroupAdmin BOOTSTRAP COMMAND... where a COMMAND is one argument:
 *   list                                listGroups(forStreamsGroups())
 *   describe:GROUP                      describeStreamsGroups
 *   offsets:GROUP                       listStreamsGroupOffsets (all partitions)
 *   alter-offsets:GROUP:TOPIC:P=OFF,... alterStreamsGroupOffsets
 *   delete-offsets:GROUP:TOPIC          deleteStreamsGroupOffsets of every partition of TOPIC it has
 *   delete:GROUP                        deleteStreamsGroups
 *   set-config:GROUP:KEY=VALUE          incrementalAlterConfigs SET on the GROUP resource
 * A command that fails prints {"command":..,"error":"<exception class>","message":..}.
 */
public final class StreamsGroupAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20000);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i < args.length; i++) {
                String command = args[i];
                String json;
                try {
                    json = run(admin, command);
                } catch (ExecutionException failed) {
                    json = error(command, failed.getCause());
                } catch (RuntimeException failed) {
                    json = error(command, failed);
                }
                System.out.println(json);
                System.out.flush();
            }
        }
    }

    private static String run(Admin admin, String command) throws Exception {
        String[] parts = command.split(":", 4);
        switch (parts[0]) {
            case "list": {
                List<String> groups = new ArrayList<>();
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forStreamsGroups()).all().get(30, TimeUnit.SECONDS)) {
                    groups.add("{\"group\":" + q(g.groupId()) + ",\"type\":" + q(g.type().map(Object::toString).orElse(null))
                               + ",\"protocol\":" + q(g.protocol()) + ",\"state\":"
                               + q(g.groupState().map(Object::toString).orElse(null)) + "}");
                }
                Collections.sort(groups);
                return "{\"command\":\"list\",\"groups\":[" + String.join(",", groups) + "]}";
            }
            case "describe": {
                StreamsGroupDescription d = admin.describeStreamsGroups(List.of(parts[1])).all().get(30, TimeUnit.SECONDS).get(parts[1]);
                return "{\"command\":\"describe\",\"group\":" + q(d.groupId()) + ",\"state\":" + q(String.valueOf(d.groupState()))
                       + ",\"groupEpoch\":" + d.groupEpoch() + ",\"targetAssignmentEpoch\":" + d.targetAssignmentEpoch()
                       + ",\"topologyEpoch\":" + d.topologyEpoch() + ",\"coordinator\":" + (d.coordinator() == null ? -1 : d.coordinator().id())
                       + ",\"assignor\":" + q(d.assignorName().orElse(null))
                       + ",\"subtopologies\":" + subtopologies(d.subtopologies()) + ",\"members\":" + members(d.members()) + "}";
            }
            case "offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listStreamsGroupOffsets(
                        Map.of(parts[1], new ListStreamsGroupOffsetsSpec())).partitionsToOffsetAndMetadata(parts[1]).get(30, TimeUnit.SECONDS);
                Map<String, Long> sorted = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    sorted.put(e.getKey().toString(), e.getValue() == null ? -1L : e.getValue().offset());
                }
                List<String> items = new ArrayList<>();
                sorted.forEach((tp, off) -> items.add(q(tp) + ":" + off));
                return "{\"command\":\"offsets\",\"group\":" + q(parts[1]) + ",\"offsets\":{" + String.join(",", items) + "}}";
            }
            case "alter-offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
                for (String item : parts[3].split(",")) {
                    String[] kv = item.split("=");
                    offsets.put(new TopicPartition(parts[2], Integer.parseInt(kv[0])), new OffsetAndMetadata(Long.parseLong(kv[1])));
                }
                admin.alterStreamsGroupOffsets(parts[1], offsets).all().get(30, TimeUnit.SECONDS);
                return "{\"command\":\"alter-offsets\",\"group\":" + q(parts[1]) + ",\"ok\":true}";
            }
            case "delete-offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listStreamsGroupOffsets(
                        Map.of(parts[1], new ListStreamsGroupOffsetsSpec())).partitionsToOffsetAndMetadata(parts[1]).get(30, TimeUnit.SECONDS);
                Set<TopicPartition> partitions = new HashSet<>();
                for (TopicPartition tp : offsets.keySet()) {
                    if (tp.topic().equals(parts[2])) {
                        partitions.add(tp);
                    }
                }
                admin.deleteStreamsGroupOffsets(parts[1], partitions).all().get(30, TimeUnit.SECONDS);
                return "{\"command\":\"delete-offsets\",\"group\":" + q(parts[1]) + ",\"partitions\":" + partitions.size() + "}";
            }
            case "delete": {
                admin.deleteStreamsGroups(List.of(parts[1])).all().get(30, TimeUnit.SECONDS);
                return "{\"command\":\"delete\",\"group\":" + q(parts[1]) + ",\"ok\":true}";
            }
            case "set-config": {
                String[] kv = parts[2].split("=", 2);
                org.apache.kafka.common.config.ConfigResource resource =
                        new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.GROUP, parts[1]);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                        new org.apache.kafka.clients.admin.ConfigEntry(kv[0], kv[1]), org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET))))
                     .all().get(30, TimeUnit.SECONDS);
                return "{\"command\":\"set-config\",\"group\":" + q(parts[1]) + ",\"ok\":true}";
            }
            default:
                throw new IllegalArgumentException("unknown command " + command);
        }
    }

    private static String subtopologies(Collection<StreamsGroupSubtopologyDescription> subtopologies) {
        List<String> items = new ArrayList<>();
        for (StreamsGroupSubtopologyDescription s : subtopologies) {
            items.add("{\"id\":" + q(s.subtopologyId()) + ",\"sourceTopics\":" + strings(s.sourceTopics())
                      + ",\"repartitionSinkTopics\":" + strings(s.repartitionSinkTopics())
                      + ",\"stateChangelogTopics\":" + topics(s.stateChangelogTopics())
                      + ",\"repartitionSourceTopics\":" + topics(s.repartitionSourceTopics()) + "}");
        }
        Collections.sort(items);
        return "[" + String.join(",", items) + "]";
    }

    private static String topics(Map<String, StreamsGroupSubtopologyDescription.TopicInfo> topics) {
        List<String> items = new ArrayList<>();
        new TreeMap<>(topics).forEach((name, info) -> items.add(q(name) + ":{\"partitions\":" + info.partitions()
                + ",\"replicationFactor\":" + info.replicationFactor() + "}"));
        return "{" + String.join(",", items) + "}";
    }

    private static String members(Collection<StreamsGroupMemberDescription> members) {
        List<String> items = new ArrayList<>();
        for (StreamsGroupMemberDescription m : members) {
            items.add("{\"memberId\":" + q(m.memberId()) + ",\"memberEpoch\":" + m.memberEpoch() + ",\"clientId\":" + q(m.clientId())
                      + ",\"processId\":" + q(m.processId()) + ",\"instanceId\":" + q(m.instanceId().orElse(null))
                      + ",\"topologyEpoch\":" + m.topologyEpoch() + ",\"isClassic\":" + m.isClassic()
                      + ",\"assignment\":" + assignment(m.assignment()) + ",\"targetAssignment\":" + assignment(m.targetAssignment()) + "}");
        }
        Collections.sort(items);
        return "[" + String.join(",", items) + "]";
    }

    private static String assignment(StreamsGroupMemberAssignment a) {
        return "{\"active\":" + taskIds(a.activeTasks()) + ",\"standby\":" + taskIds(a.standbyTasks())
               + ",\"warmup\":" + taskIds(a.warmupTasks()) + "}";
    }

    private static String taskIds(List<StreamsGroupMemberAssignment.TaskIds> tasks) {
        List<String> ids = new ArrayList<>();
        for (StreamsGroupMemberAssignment.TaskIds t : tasks) {
            for (int p : t.partitions()) {
                ids.add(t.subtopologyId() + "_" + p);
            }
        }
        Collections.sort(ids);
        return strings(ids);
    }

    private static String strings(Collection<String> items) {
        List<String> quoted = new ArrayList<>();
        for (String s : items) {
            quoted.add(q(s));
        }
        return "[" + String.join(",", quoted) + "]";
    }

    private static String error(String command, Throwable t) {
        return "{\"command\":" + q(command) + ",\"error\":" + q(t.getClass().getSimpleName()) + ",\"message\":" + q(String.valueOf(t.getMessage())) + "}";
    }

    private static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
