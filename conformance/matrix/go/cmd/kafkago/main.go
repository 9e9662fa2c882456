// Command kafkago runs the client matrix's scenarios with segmentio/kafka-go. It has no
// transactional (nor idempotent) producer: those scenarios are unsupported.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"kafkapy/conformance/matrix/go/internal/contract"
)

type client struct {
	bootstrap, prefix string
	kc                *kafka.Client
}

func main() {
	bootstrap, prefix := contract.Args(os.Args[1:])
	contract.Run(&client{bootstrap, prefix, &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 10 * time.Second}})
}

var configSources = []string{"UNKNOWN", "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
	"DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG", "DYNAMIC_BROKER_LOGGER_CONFIG"}

func errName(err error) string {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return contract.CodeName(int16(kerr))
	}
	return contract.ErrName(err)
}

func (c *client) setupTopic(ctx context.Context, topic string, partitions int) error {
	resp, err := c.kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

func records(start, count int) []kafka.Record {
	out := make([]kafka.Record, 0, count)
	for i := start; i < start+count; i++ {
		k, v := contract.Record(i)
		out = append(out, kafka.Record{Key: kafka.NewBytes(k), Value: kafka.NewBytes(v),
			Headers: []kafka.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	return out
}

// write produces to partition 0 in one request and returns the first and last offsets.
func (c *client) write(ctx context.Context, topic string, start, count int, codec kafka.Compression) (int64, int64, error) {
	resp, err := c.kc.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: 0, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(records(start, count)...), Compression: codec})
	if err != nil {
		return 0, 0, err
	}
	if resp.Error != nil {
		return 0, 0, resp.Error
	}
	return resp.BaseOffset, resp.BaseOffset + int64(count) - 1, nil
}

func read(ctx context.Context, r *kafka.Reader, count int, settle time.Duration, fetch bool) ([]kafka.Message, error) {
	var msgs []kafka.Message
	for {
		wait := 15 * time.Second
		if len(msgs) >= count {
			if settle == 0 {
				return msgs, nil
			}
			wait = settle
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		var m kafka.Message
		var err error
		if fetch {
			m, err = r.FetchMessage(rctx)
		} else {
			m, err = r.ReadMessage(rctx)
		}
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return msgs, nil
			}
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

func (c *client) readAssigned(ctx context.Context, topic string, count int) ([]kafka.Message, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.bootstrap}, Topic: topic, Partition: 0,
		MaxWait: 200 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		return nil, err
	}
	return read(ctx, r, count, time.Second, false)
}

func keysValues(msgs []kafka.Message) ([][]byte, [][]byte) {
	var keys, values [][]byte
	for _, m := range msgs {
		keys, values = append(keys, m.Key), append(values, m.Value)
	}
	return keys, values
}

func (c *client) Metadata(ctx context.Context) (contract.Observed, error) {
	md, err := c.kc.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, err
	}
	return contract.Observed{"brokers": len(md.Brokers), "controller": md.Controller.Host != "", "topics_listed": md.Topics != nil}, nil
}

func (c *client) topicMetadata(ctx context.Context, topic string) (*kafka.Topic, error) {
	md, err := c.kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	for i := range md.Topics {
		if md.Topics[i].Name == topic {
			return &md.Topics[i], nil
		}
	}
	return nil, fmt.Errorf("no metadata for %s", topic)
}

func (c *client) CreateDeleteTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-created"
	if err := c.setupTopic(ctx, topic, 3); err != nil {
		return nil, err
	}
	var partitions int
	contract.Wait(ctx, func() bool {
		t, err := c.topicMetadata(ctx, topic)
		if err == nil && t.Error == nil {
			partitions = len(t.Partitions)
		}
		return partitions > 0
	})
	twice := c.setupTopic(ctx, topic, 3)
	resp, err := c.kc.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return nil, err
	}
	gone := contract.Wait(ctx, func() bool {
		md, err := c.kc.Metadata(ctx, &kafka.MetadataRequest{})
		if err != nil {
			return false
		}
		for _, t := range md.Topics {
			if t.Name == topic {
				return false
			}
		}
		return true
	})
	return contract.Observed{"partitions": partitions, "create_twice_error": errName(twice), "gone_after_delete": gone}, nil
}

var codecs = map[string]kafka.Compression{"none": 0, "gzip": compress.Gzip, "snappy": compress.Snappy,
	"lz4": compress.Lz4, "zstd": compress.Zstd}

func (c *client) Produce(ctx context.Context, codec string) (contract.Observed, error) {
	topic := c.prefix + "-produce-" + codec
	if err := c.setupTopic(ctx, topic, 1); err != nil {
		return nil, err
	}
	first, last, err := c.write(ctx, topic, 0, contract.RecordCount, codecs[codec])
	if err != nil {
		return nil, err
	}
	msgs, err := c.readAssigned(ctx, topic, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	keys, values := keysValues(msgs)
	headers := true
	for i, m := range msgs {
		headers = headers && len(m.Headers) == 1 && m.Headers[0].Key == "i" && string(m.Headers[0].Value) == fmt.Sprint(i)
	}
	return contract.Observed{"first_offset": first, "last_offset": last, "read": len(msgs),
		"round_trip": contract.RoundTrips(keys, values, 0), "idempotent": false, "headers_round_trip": headers}, nil
}

func (c *client) consumeGroup(ctx context.Context, group, topic string, count int) ([]kafka.Message, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.bootstrap}, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond, HeartbeatInterval: time.Second,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 5 * time.Second})
	defer r.Close()
	msgs, err := read(ctx, r, count, 0, true)
	if err != nil {
		return msgs, err
	}
	if len(msgs) > 0 {
		if err := r.CommitMessages(ctx, msgs[len(msgs)-1]); err != nil {
			return msgs, err
		}
	}
	return msgs, nil
}

func (c *client) GroupConsumeCommit(ctx context.Context) (contract.Observed, error) {
	topic, group := c.prefix+"-group", c.prefix+"-g"
	if err := c.setupTopic(ctx, topic, 1); err != nil {
		return nil, err
	}
	if _, _, err := c.write(ctx, topic, 0, contract.RecordCount, 0); err != nil {
		return nil, err
	}
	first, err := c.consumeGroup(ctx, group, topic, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	offsets, err := c.kc.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil {
		return nil, err
	}
	var committed any
	for _, p := range offsets.Topics[topic] {
		if p.Partition == 0 {
			committed = p.CommittedOffset
		}
	}
	if _, _, err := c.write(ctx, topic, contract.RecordCount, contract.SecondBatch, 0); err != nil {
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
	return nil, contract.Unsupported{Reason: "kafka-go has no transactional producer"}
}

func (c *client) ErrorFencedProducer(ctx context.Context) (contract.Observed, error) {
	return nil, contract.Unsupported{Reason: "kafka-go has no transactional producer"}
}

func (c *client) describe(ctx context.Context, kind kafka.ResourceType, name string, keys ...string) (map[string][]string, error) {
	resp, err := c.kc.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kind, ResourceName: name, ConfigNames: keys}}})
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, r.Error
		}
		for _, e := range r.ConfigEntries {
			source := "UNKNOWN"
			if int(e.ConfigSource) >= 0 && int(e.ConfigSource) < len(configSources) {
				source = configSources[e.ConfigSource]
			}
			found[e.ConfigName] = []string{e.ConfigValue, source}
		}
	}
	return found, nil
}

func (c *client) AdminDescribeConfigs(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-configs"
	if err := c.setupTopic(ctx, topic, 1); err != nil {
		return nil, err
	}
	before, err := c.describe(ctx, kafka.ResourceTypeTopic, topic, "retention.ms", "cleanup.policy")
	if err != nil {
		return nil, err
	}
	broker, err := c.describe(ctx, kafka.ResourceTypeBroker, "1", "compression.type")
	if err != nil {
		return nil, err
	}
	altered, err := c.kc.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "retention.ms", Value: contract.RetentionAfter,
				ConfigOperation: kafka.ConfigOperationSet}}}}})
	if err != nil {
		return nil, err
	}
	alterResult := "OK"
	for _, r := range altered.Resources {
		if r.Error != nil {
			alterResult = errName(r.Error)
		}
	}
	after, err := c.describe(ctx, kafka.ResourceTypeTopic, topic, "retention.ms", "cleanup.policy")
	if err != nil {
		return nil, err
	}
	compression := broker["compression.type"]
	if len(compression) == 0 {
		return nil, errors.New("broker 1 has no compression.type")
	}
	return contract.Observed{"retention_ms_before": before["retention.ms"], "retention_ms_after": after["retention.ms"],
		"cleanup_policy": before["cleanup.policy"], "broker_compression_type": compression[0],
		"alter_api": "incremental_alter_configs", "alter_result": alterResult}, nil
}

func (c *client) ErrorUnknownTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-missing"
	t, err := c.topicMetadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	_, _, produceErr := c.write(ctx, topic, 0, 1, 0)
	return contract.Observed{"describe_error": errName(t.Error), "error": errName(produceErr)}, nil
}

func (c *client) ErrorNotAuthorized(ctx context.Context) (contract.Observed, error) {
	if err := contract.RequireAuthorizer(); err != nil {
		return nil, err
	}
	topic := c.prefix + "-denied"
	if err := c.setupTopic(ctx, topic, 1); err != nil {
		return nil, err
	}
	resp, err := c.kc.CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: []kafka.ACLEntry{{ResourceType: kafka.ResourceTypeTopic,
		ResourceName: topic, ResourcePatternType: kafka.PatternTypeLiteral, Principal: "User:ANONYMOUS", Host: "*",
		Operation: kafka.ACLOperationTypeAll, PermissionType: kafka.ACLPermissionTypeDeny}}})
	if err != nil {
		return nil, err
	}
	for _, e := range resp.Errors {
		if e != nil {
			return nil, e
		}
	}
	_, _, produceErr := c.write(ctx, topic, 0, 1, 0)
	return contract.Observed{"error": errName(produceErr)}, nil
}
