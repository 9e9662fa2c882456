// Command sarama runs the client matrix's scenarios with IBM/sarama speaking the protocol of the
// Kafka version given by -kafka-version (config.Version).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"kafkapy/conformance/matrix/go/internal/contract"
)

type client struct {
	bootstrap, prefix string
	version           sarama.KafkaVersion
}

func main() {
	versionFlag := flag.String("kafka-version", "3.6.0", "sarama config.Version")
	flag.Parse()
	version, err := sarama.ParseKafkaVersion(*versionFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bootstrap, prefix := contract.Args(flag.Args())
	contract.Run(&client{bootstrap, prefix, version})
}

// Kafka's ConfigSource names; sarama's ConfigSource numbers are Kafka's.
var configSources = []string{"UNKNOWN", "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
	"DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG", "DYNAMIC_BROKER_LOGGER_CONFIG"}

func errName(err error) string {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return contract.CodeName(int16(kerr))
	}
	var perrs sarama.ProducerErrors
	if errors.As(err, &perrs) && len(perrs) > 0 {
		return errName(perrs[0].Err)
	}
	return contract.ErrName(err)
}

func (c *client) config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = c.version
	cfg.ClientID = "kafkapy-matrix"
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 5*time.Second, 10*time.Second, 10*time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	return cfg
}

func (c *client) idempotent(cfg *sarama.Config) {
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 5
}

func (c *client) transactional(cfg *sarama.Config, id string) {
	c.idempotent(cfg)
	cfg.Producer.Transaction.ID = id
}

func (c *client) admin() (sarama.ClusterAdmin, error) {
	return sarama.NewClusterAdmin([]string{c.bootstrap}, c.config())
}

func (c *client) setupTopic(topic string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	defer adm.Close()
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
}

func message(topic string, i int) *sarama.ProducerMessage {
	k, v := contract.Record(i)
	return &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.ByteEncoder(k), Value: sarama.ByteEncoder(v),
		Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}}}
}

func (c *client) write(topic string, start, count int, cfg *sarama.Config) ([]int64, error) {
	producer, err := sarama.NewSyncProducer([]string{c.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	msgs := make([]*sarama.ProducerMessage, 0, count)
	for i := start; i < start+count; i++ {
		msgs = append(msgs, message(topic, i))
	}
	if err := producer.SendMessages(msgs); err != nil {
		return nil, err
	}
	offsets := make([]int64, 0, count)
	for _, m := range msgs {
		offsets = append(offsets, m.Offset)
	}
	return offsets, nil
}

func (c *client) readAssigned(ctx context.Context, topic string, count int, cfg *sarama.Config) ([]*sarama.ConsumerMessage, error) {
	consumer, err := sarama.NewConsumer([]string{c.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var records []*sarama.ConsumerMessage
	settle := time.After(24 * time.Hour)
	for {
		select {
		case m := <-pc.Messages():
			records = append(records, m)
			if len(records) == count {
				settle = time.After(time.Second) // anything past count is a wrong answer: wait for it
			}
		case e := <-pc.Errors():
			return records, e
		case <-settle:
			return records, nil
		case <-ctx.Done():
			return records, nil
		}
	}
}

func keysValues(records []*sarama.ConsumerMessage) ([][]byte, [][]byte) {
	var keys, values [][]byte
	for _, r := range records {
		keys, values = append(keys, r.Key), append(values, r.Value)
	}
	return keys, values
}

func (c *client) Metadata(ctx context.Context) (contract.Observed, error) {
	cl, err := sarama.NewClient([]string{c.bootstrap}, c.config())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	topics, err := cl.Topics()
	if err != nil {
		return nil, err
	}
	_, controllerErr := cl.Controller()
	return contract.Observed{"brokers": len(cl.Brokers()), "controller": controllerErr == nil, "topics_listed": topics != nil}, nil
}

func (c *client) CreateDeleteTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-created"
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return nil, err
	}
	var partitions int
	contract.Wait(ctx, func() bool {
		md, err := adm.DescribeTopics([]string{topic})
		if err == nil && len(md) == 1 && md[0].Err == sarama.ErrNoError {
			partitions = len(md[0].Partitions)
		}
		return partitions > 0
	})
	twice := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	if err := adm.DeleteTopic(topic); err != nil {
		return nil, err
	}
	gone := contract.Wait(ctx, func() bool {
		topics, err := adm.ListTopics()
		_, present := topics[topic]
		return err == nil && !present
	})
	return contract.Observed{"partitions": partitions, "create_twice_error": errName(twice), "gone_after_delete": gone}, nil
}

var codecs = map[string]sarama.CompressionCodec{"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}

func (c *client) Produce(ctx context.Context, codec string) (contract.Observed, error) {
	if codec == "zstd" && !c.version.IsAtLeast(sarama.V2_1_0_0) {
		return nil, contract.Unsupported{Reason: "zstd needs Kafka 2.1"}
	}
	topic := c.prefix + "-produce-" + codec
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	cfg := c.config()
	c.idempotent(cfg)
	cfg.Producer.Compression = codecs[codec]
	offsets, err := c.write(topic, 0, contract.RecordCount, cfg)
	if err != nil {
		return nil, err
	}
	records, err := c.readAssigned(ctx, topic, contract.RecordCount, c.config())
	if err != nil {
		return nil, err
	}
	keys, values := keysValues(records)
	headers := true
	for i, r := range records {
		headers = headers && len(r.Headers) == 1 && string(r.Headers[0].Key) == "i" && string(r.Headers[0].Value) == fmt.Sprint(i)
	}
	return contract.Observed{"first_offset": offsets[0], "last_offset": offsets[len(offsets)-1], "read": len(records),
		"round_trip": contract.RoundTrips(keys, values, 0), "idempotent": true, "headers_round_trip": headers}, nil
}

// groupHandler reads `want` records, marks them, commits and stops the session.
type groupHandler struct {
	want    int
	records []*sarama.ConsumerMessage
	done    chan struct{}
	once    sync.Once
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *groupHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.records = append(h.records, m)
		session.MarkMessage(m, "")
		if len(h.records) >= h.want {
			session.Commit()
			h.once.Do(func() { close(h.done) })
			return nil
		}
	}
	return nil
}

func (c *client) consumeGroup(ctx context.Context, group, topic string, want int) ([]*sarama.ConsumerMessage, error) {
	cfg := c.config()
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup([]string{c.bootstrap}, group, cfg)
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	h := &groupHandler{want: want, done: make(chan struct{})}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		for gctx.Err() == nil {
			if err := cg.Consume(gctx, []string{topic}, h); err != nil {
				errs <- err
				return
			}
		}
	}()
	select {
	case <-h.done:
	case err := <-errs:
		return nil, err
	case <-ctx.Done():
	}
	return h.records, nil
}

func (c *client) GroupConsumeCommit(ctx context.Context) (contract.Observed, error) {
	topic, group := c.prefix+"-group", c.prefix+"-g"
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	if _, err := c.write(topic, 0, contract.RecordCount, c.config()); err != nil {
		return nil, err
	}
	first, err := c.consumeGroup(ctx, group, topic, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	offsets, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if err != nil {
		return nil, err
	}
	var committed any
	if block := offsets.GetBlock(topic, 0); block != nil {
		committed = block.Offset
	}
	if _, err := c.write(topic, contract.RecordCount, contract.SecondBatch, c.config()); err != nil {
		return nil, err
	}
	later, err := c.consumeGroup(ctx, group, topic, contract.SecondBatch)
	if err != nil {
		return nil, err
	}
	observed := contract.Observed{"read": len(first), "committed": committed, "second_read": len(later), "second_first_offset": nil}
	if len(later) > 0 {
		observed["second_first_offset"] = later[0].Offset
	}
	keys, values := keysValues(later)
	observed["second_round_trip"] = contract.RoundTrips(keys, values, contract.RecordCount)
	return observed, nil
}

func (c *client) Transactions(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-txn"
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	cfg := c.config()
	c.transactional(cfg, c.prefix+"-tx")
	producer, err := sarama.NewSyncProducer([]string{c.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	for _, commit := range []bool{true, false} {
		if err := producer.BeginTxn(); err != nil {
			return nil, err
		}
		for i := 0; i < contract.TxnRecords; i++ {
			if _, _, err := producer.SendMessage(message(topic, i)); err != nil {
				return nil, err
			}
		}
		end := producer.AbortTxn
		if commit {
			end = producer.CommitTxn
		}
		if err := end(); err != nil {
			return nil, err
		}
	}
	committedCfg := c.config()
	committedCfg.Consumer.IsolationLevel = sarama.ReadCommitted
	committed, err := c.readAssigned(ctx, topic, contract.TxnRecords, committedCfg)
	if err != nil {
		return nil, err
	}
	uncommitted, err := c.readAssigned(ctx, topic, 2*contract.TxnRecords, c.config())
	if err != nil {
		return nil, err
	}
	return contract.Observed{"read_committed": len(committed), "read_uncommitted": len(uncommitted)}, nil
}

func (c *client) AdminDescribeConfigs(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-configs"
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	describe := func(kind sarama.ConfigResourceType, name string, keys ...string) (map[string][]string, error) {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: kind, Name: name, ConfigNames: keys})
		if err != nil {
			return nil, err
		}
		found := map[string][]string{}
		for _, e := range entries {
			source := "UNKNOWN"
			if int(e.Source) < len(configSources) {
				source = configSources[e.Source]
			}
			found[e.Name] = []string{e.Value, source}
		}
		return found, nil
	}
	before, err := describe(sarama.TopicResource, topic, "retention.ms", "cleanup.policy")
	if err != nil {
		return nil, err
	}
	broker, err := describe(sarama.BrokerResource, "1", "compression.type")
	if err != nil {
		return nil, err
	}
	value := contract.RetentionAfter
	api := "incremental_alter_configs"
	if c.version.IsAtLeast(sarama.V2_3_0_0) {
		err = adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value}}, false)
	} else {
		api = "alter_configs"
		err = adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": &value}, false)
	}
	if err != nil {
		return nil, err
	}
	after, err := describe(sarama.TopicResource, topic, "retention.ms", "cleanup.policy")
	if err != nil {
		return nil, err
	}
	compression := broker["compression.type"]
	if len(compression) == 0 {
		return nil, errors.New("broker 1 has no compression.type")
	}
	return contract.Observed{"retention_ms_before": before["retention.ms"], "retention_ms_after": after["retention.ms"],
		"cleanup_policy": before["cleanup.policy"], "broker_compression_type": compression[0], "alter_api": api,
		"alter_result": "OK"}, nil
}

func (c *client) ErrorUnknownTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-missing"
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	md, err := adm.DescribeTopics([]string{topic})
	if err != nil {
		return nil, err
	}
	describeErr := "none"
	if len(md) == 1 {
		describeErr = errName(md[0].Err)
	}
	cfg := c.config()
	cfg.Producer.Retry.Max = 1
	_, produceErr := c.write(topic, 0, 1, cfg)
	return contract.Observed{"describe_error": strings.TrimSpace(describeErr), "error": errName(produceErr)}, nil
}

func (c *client) ErrorFencedProducer(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-fenced"
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	var producers []sarama.SyncProducer
	defer func() {
		for _, p := range producers {
			p.Close()
		}
	}()
	for range 2 {
		cfg := c.config()
		c.transactional(cfg, c.prefix+"-fenced-tx")
		// NewSyncProducer runs InitProducerId: the second one fences the first.
		p, err := sarama.NewSyncProducer([]string{c.bootstrap}, cfg)
		if err != nil {
			return nil, err
		}
		producers = append(producers, p)
		if err := p.BeginTxn(); err != nil {
			return nil, err
		}
		if len(producers) == 1 {
			if _, _, err := p.SendMessage(message(topic, 0)); err != nil {
				return nil, err
			}
		}
	}
	_, _, err := producers[0].SendMessage(message(topic, 1))
	if err == nil {
		err = producers[0].CommitTxn()
	}
	return contract.Observed{"error": errName(err)}, nil
}

func (c *client) ErrorNotAuthorized(ctx context.Context) (contract.Observed, error) {
	if err := contract.RequireAuthorizer(); err != nil {
		return nil, err
	}
	topic := c.prefix + "-denied"
	if err := c.setupTopic(topic); err != nil {
		return nil, err
	}
	adm, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	err = adm.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic,
		ResourcePatternType: sarama.AclPatternLiteral},
		sarama.Acl{Principal: "User:ANONYMOUS", Host: "*", Operation: sarama.AclOperationAll, PermissionType: sarama.AclPermissionDeny})
	if err != nil {
		return nil, err
	}
	cfg := c.config()
	cfg.Producer.Retry.Max = 1
	_, produceErr := c.write(topic, 0, 1, cfg)
	return contract.Observed{"error": errName(produceErr)}, nil
}
