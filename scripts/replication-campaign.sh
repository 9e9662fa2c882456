#!/usr/bin/env bash
# The long replication campaign (Kafka's replication system test, redone for kafkapy): a 3-broker
# ZooKeeper-mode cluster on loopback, an idempotent acks=all producer and a consumer running
# throughout, and ROUNDS faults rotating over {clean shutdown, hard kill, clean bounce, hard bounce}
# x {leader of partition 0, controller}; then every acknowledged record must be in the log exactly
# once, in order. See conformance/replication_campaign.py.
#
# HOW LONG: about 6-8 s per round when the cluster behaves (hard kills wait for the 6 s ZooKeeper
# session timeout), so the default 50 rounds take 5-7 minutes (measured: 5 min 25 s and 6 min 48 s,
# 93,593 and 114,821 records acknowledged); 200 rounds about 25 minutes.
# Every wait is bounded; the whole run is killed after ROUNDS x 30 s + 15 min at the latest.
#
#   bash scripts/replication-campaign.sh                 # 50 rounds -> build/replication-campaign.json
#   ROUNDS=200 bash scripts/replication-campaign.sh
#   bash scripts/replication-campaign.sh --rate 1000     # extra arguments go to the campaign
#
# Exit status 0 when the campaign passed, 1 when it found a violation (listed, with the brokers'
# warnings), 124 when the outer timeout hit. Broker logs stay in build/replication-campaign/.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
ROUNDS="${ROUNDS:-50}"
OUT="${OUT:-build/replication-campaign.json}"
WORK_DIR=build/replication-campaign

if ! "$PYTHON" -c "import confluent_kafka, kazoo" 2>/dev/null; then
    echo "!!! scripts/replication-campaign.sh: needs confluent-kafka and kazoo (bash scripts/install-test-deps.sh)" >&2
    exit 1
fi
rm -rf "$WORK_DIR"  # a fresh cluster each run; this directory is ours
mkdir -p "$WORK_DIR"

# Rounds stop being started after ROUNDS x 25 s, so the JSON is written before the outer timeout.
timeout --signal=TERM --kill-after=60 "$((ROUNDS * 30 + 900))" \
    "$PYTHON" -m conformance.replication_campaign --rounds "$ROUNDS" --time-budget "$((ROUNDS * 25))" \
    --work-dir "$WORK_DIR" --out "$OUT" "$@"
rc=$?
if [[ $rc == 124 ]]; then
    echo "!!! scripts/replication-campaign.sh: timed out; broker logs in $WORK_DIR" >&2
fi
exit $rc
