import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.common.errors.InvalidUpdateVersionException;

/**
 * Feature versioning (KIP-584) through kafka-clients 3.9's Admin API, as kafka-features.sh uses it:
 * describeFeatures (supported ranges, finalized levels), updateFeatures (a safe downgrade of
 * group.version to 0 and back, a dry run, and Kafka's INVALID_UPDATE_VERSION for a level the broker
 * does not support and for a metadata.version downgrade).
 *
 * usage: FeaturesCheck BOOTSTRAP
 */
public final class FeaturesCheck {
    public static void main(String[] args) {
        String bootstrap = Conformance.arg(args, 0, "FeaturesCheck BOOTSTRAP");
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "conformance-features");
        try (Admin admin = Admin.create(props)) {
            System.exit(Conformance.runSteps("FeaturesCheck", java.util.List.of(
                    new Conformance.Step("describeFeatures", () -> {
                        FeatureMetadata features = Conformance.await(admin.describeFeatures().featureMetadata(),
                                "describeFeatures");
                        System.out.println(features);
                        SupportedVersionRange metadata = features.supportedFeatures().get("metadata.version");
                        Conformance.check(metadata != null && metadata.maxVersion() >= 21,
                                "metadata.version supported range %s", metadata);
                        FinalizedVersionRange group = features.finalizedFeatures().get("group.version");
                        Conformance.check(group != null && group.maxVersionLevel() == 1,
                                "group.version finalized %s", group);
                        Conformance.check(features.finalizedFeaturesEpoch().isPresent(), "no finalized epoch");
                    }),
                    new Conformance.Step("updateFeatures errors", () -> {
                        Conformance.awaitFailure(admin.updateFeatures(Map.of("metadata.version",
                                new FeatureUpdate((short) 99, FeatureUpdate.UpgradeType.UPGRADE)),
                                new UpdateFeaturesOptions()).all(), InvalidUpdateVersionException.class,
                                "metadata.version 99");
                        Conformance.awaitFailure(admin.updateFeatures(Map.of("metadata.version",
                                new FeatureUpdate((short) 8, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                                new UpdateFeaturesOptions()).all(), InvalidUpdateVersionException.class,
                                "metadata.version downgrade");
                        Conformance.await(admin.updateFeatures(Map.of("group.version",
                                new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                                new UpdateFeaturesOptions().validateOnly(true)).all(), "dry run");
                        checkGroupVersion(admin, 1);
                    }),
                    new Conformance.Step("group.version down to 0 and back to 1", () -> {
                        Conformance.await(admin.updateFeatures(Map.of("group.version",
                                new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                                new UpdateFeaturesOptions()).all(), "downgrade group.version");
                        checkGroupVersion(admin, 0);
                        Conformance.await(admin.updateFeatures(Map.of("group.version",
                                new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                                new UpdateFeaturesOptions()).all(), "upgrade group.version");
                        checkGroupVersion(admin, 1);
                    }))));
        }
    }

    private static void checkGroupVersion(Admin admin, int level) {
        FeatureMetadata features = Conformance.await(admin.describeFeatures().featureMetadata(), "describeFeatures");
        FinalizedVersionRange group = features.finalizedFeatures().get("group.version");
        int found = group == null ? 0 : group.maxVersionLevel();
        Conformance.checkEquals(level, found, "finalized group.version");
    }

    private FeaturesCheck() {}
}
