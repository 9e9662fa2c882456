// Command confluent runs the client matrix's scenarios with confluent-kafka-go (cgo, linked against
// the static librdkafka bundled inside the module). Built with CGO_ENABLED=1, apart from the others.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"kafkapy/conformance/matrix/go/internal/contract"
)

type client struct{ bootstrap, prefix string }

func main() {
	bootstrap, prefix := contract.Args(os.Args[1:])
	contract.Run(&client{bootstrap, prefix})
}

// errName: a broker error's Kafka name, a librdkafka-local error's text.
func errName(err error) string {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		if code := kerr.Code(); code > 0 {
			return contract.CodeName(int16(code))
		}
		return kerr.Code().String()
	}
	return contract.ErrName(err)
}

func (c *client) conf(extra kafka.ConfigMap) *kafka.ConfigMap {
	m := kafka.ConfigMap{"bootstrap.servers": c.bootstrap, "log_level": 4}
	for k, v := range extra {
		m[k] = v
	}
	return &m
}

func (c *client) admin() (*kafka.AdminClient, error) {
	return kafka.NewAdminClient(c.conf(nil))
}

func (c *client) createTopic(ctx context.Context, a *kafka.AdminClient, topic string, partitions int) error {
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil {
		return err
	}
	if res[0].Error.Code() != kafka.ErrNoError {
		return res[0].Error
	}
	return nil
}

func (c *client) setupTopic(ctx context.Context, topic string) error {
	a, err := c.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := c.createTopic(ctx, a, topic, 1); err != nil {
		return err
	}
	contract.Wait(ctx, func() bool {
		md, err := a.GetMetadata(&topic, false, 2000)
		return err == nil && md.Topics[topic].Error.Code() == kafka.ErrNoError && len(md.Topics[topic].Partitions) == 1
	})
	return nil
}

func (c *client) write(ctx context.Context, p *kafka.Producer, topic string, start, count int) ([]int64, error) {
	deliveries := make(chan kafka.Event, count)
	for i := start; i < start+count; i++ {
		k, v := contract.Record(i)
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Key: k, Value: v,
			Headers: []kafka.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
		if err := p.Produce(msg, deliveries); err != nil {
			return nil, err
		}
	}
	offsets := make([]int64, 0, count)
	for range count {
		select {
		case e := <-deliveries:
			m := e.(*kafka.Message)
			if m.TopicPartition.Error != nil {
				return nil, m.TopicPartition.Error
			}
			offsets = append(offsets, int64(m.TopicPartition.Offset))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return offsets, nil
}

func (c *client) produceWith(ctx context.Context, extra kafka.ConfigMap, topic string, start, count int) ([]int64, error) {
	p, err := kafka.NewProducer(c.conf(extra))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return c.write(ctx, p, topic, start, count)
}

func read(ctx context.Context, cons *kafka.Consumer, count int, settle time.Duration) ([]*kafka.Message, error) {
	var msgs []*kafka.Message
	var settleUntil time.Time
	for ctx.Err() == nil {
		if len(msgs) >= count {
			if settle == 0 {
				break
			}
			if settleUntil.IsZero() {
				settleUntil = time.Now().Add(settle)
			} else if time.Now().After(settleUntil) {
				break
			}
		}
		m, err := cons.ReadMessage(200 * time.Millisecond)
		if err != nil {
			var kerr kafka.Error
			if errors.As(err, &kerr) && kerr.IsTimeout() {
				continue
			}
			return msgs, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func (c *client) readAssigned(ctx context.Context, topic string, count int, extra kafka.ConfigMap) ([]*kafka.Message, error) {
	conf := kafka.ConfigMap{"group.id": c.prefix + "-assign", "enable.auto.commit": false}
	for k, v := range extra {
		conf[k] = v
	}
	cons, err := kafka.NewConsumer(c.conf(conf))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := cons.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, err
	}
	return read(ctx, cons, count, time.Second)
}

func keysValues(msgs []*kafka.Message) ([][]byte, [][]byte) {
	var keys, values [][]byte
	for _, m := range msgs {
		keys, values = append(keys, m.Key), append(values, m.Value)
	}
	return keys, values
}

func (c *client) Metadata(ctx context.Context) (contract.Observed, error) {
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	cluster, err := a.DescribeCluster(ctx)
	if err != nil {
		return nil, err
	}
	md, err := a.GetMetadata(nil, true, 10000)
	if err != nil {
		return nil, err
	}
	return contract.Observed{"brokers": len(cluster.Nodes), "controller": cluster.Controller != nil, "topics_listed": md.Topics != nil}, nil
}

func (c *client) CreateDeleteTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-created"
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if err := c.createTopic(ctx, a, topic, 3); err != nil {
		return nil, err
	}
	var partitions int
	contract.Wait(ctx, func() bool {
		md, err := a.GetMetadata(&topic, false, 2000)
		if err == nil && md.Topics[topic].Error.Code() == kafka.ErrNoError {
			partitions = len(md.Topics[topic].Partitions)
		}
		return partitions > 0
	})
	twice := c.createTopic(ctx, a, topic, 3)
	res, err := a.DeleteTopics(ctx, []string{topic})
	if err == nil && res[0].Error.Code() != kafka.ErrNoError {
		err = res[0].Error
	}
	if err != nil {
		return nil, err
	}
	gone := contract.Wait(ctx, func() bool {
		md, err := a.GetMetadata(nil, true, 2000)
		_, present := md.Topics[topic]
		return err == nil && !present
	})
	return contract.Observed{"partitions": partitions, "create_twice_error": errName(twice), "gone_after_delete": gone}, nil
}

func (c *client) Produce(ctx context.Context, codec string) (contract.Observed, error) {
	topic := c.prefix + "-produce-" + codec
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	offsets, err := c.produceWith(ctx, kafka.ConfigMap{"enable.idempotence": true, "acks": "all", "compression.type": codec}, topic, 0, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	msgs, err := c.readAssigned(ctx, topic, contract.RecordCount, nil)
	if err != nil {
		return nil, err
	}
	keys, values := keysValues(msgs)
	headers := true
	for i, m := range msgs {
		headers = headers && len(m.Headers) == 1 && m.Headers[0].Key == "i" && string(m.Headers[0].Value) == fmt.Sprint(i)
	}
	return contract.Observed{"first_offset": offsets[0], "last_offset": offsets[len(offsets)-1], "read": len(msgs),
		"round_trip": contract.RoundTrips(keys, values, 0), "idempotent": true, "headers_round_trip": headers}, nil
}

func (c *client) consumeGroup(ctx context.Context, group, topic string, count int) ([]*kafka.Message, int64, error) {
	cons, err := kafka.NewConsumer(c.conf(kafka.ConfigMap{"group.id": group, "enable.auto.commit": false, "auto.offset.reset": "earliest"}))
	if err != nil {
		return nil, 0, err
	}
	defer cons.Close()
	if err := cons.SubscribeTopics([]string{topic}, nil); err != nil {
		return nil, 0, err
	}
	msgs, err := read(ctx, cons, count, 0)
	if err != nil {
		return msgs, 0, err
	}
	if _, err := cons.Commit(); err != nil {
		return msgs, 0, err
	}
	committed, err := cons.Committed([]kafka.TopicPartition{{Topic: &topic, Partition: 0}}, 10000)
	if err != nil {
		return msgs, 0, err
	}
	return msgs, int64(committed[0].Offset), nil
}

func (c *client) GroupConsumeCommit(ctx context.Context) (contract.Observed, error) {
	topic, group := c.prefix+"-group", c.prefix+"-g"
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	if _, err := c.produceWith(ctx, nil, topic, 0, contract.RecordCount); err != nil {
		return nil, err
	}
	first, committed, err := c.consumeGroup(ctx, group, topic, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	if _, err := c.produceWith(ctx, nil, topic, contract.RecordCount, contract.SecondBatch); err != nil {
		return nil, err
	}
	later, _, err := c.consumeGroup(ctx, group, topic, contract.SecondBatch)
	if err != nil {
		return nil, err
	}
	observed := contract.Observed{"read": len(first), "committed": committed, "second_read": len(later), "second_first_offset": nil}
	if len(later) > 0 {
		observed["second_first_offset"] = int64(later[0].TopicPartition.Offset)
	}
	keys, values := keysValues(later)
	observed["second_round_trip"] = contract.RoundTrips(keys, values, contract.RecordCount)
	return observed, nil
}

func (c *client) Transactions(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-txn"
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	p, err := kafka.NewProducer(c.conf(kafka.ConfigMap{"transactional.id": c.prefix + "-tx"}))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		return nil, err
	}
	for _, commit := range []bool{true, false} {
		if err := p.BeginTransaction(); err != nil {
			return nil, err
		}
		if _, err := c.write(ctx, p, topic, 0, contract.TxnRecords); err != nil {
			return nil, err
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			return nil, err
		}
	}
	committed, err := c.readAssigned(ctx, topic, contract.TxnRecords, kafka.ConfigMap{"isolation.level": "read_committed"})
	if err != nil {
		return nil, err
	}
	uncommitted, err := c.readAssigned(ctx, topic, 2*contract.TxnRecords, kafka.ConfigMap{"isolation.level": "read_uncommitted"})
	if err != nil {
		return nil, err
	}
	return contract.Observed{"read_committed": len(committed), "read_uncommitted": len(uncommitted)}, nil
}

func (c *client) AdminDescribeConfigs(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-configs"
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	describe := func(kind kafka.ResourceType, name string) (map[string][]string, error) {
		res, err := a.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kind, Name: name}})
		if err != nil {
			return nil, err
		}
		if res[0].Error.Code() != kafka.ErrNoError {
			return nil, res[0].Error
		}
		found := map[string][]string{}
		for key, e := range res[0].Config {
			found[key] = []string{e.Value, e.Source.String()}
		}
		return found, nil
	}
	before, err := describe(kafka.ResourceTopic, topic)
	if err != nil {
		return nil, err
	}
	broker, err := describe(kafka.ResourceBroker, "1")
	if err != nil {
		return nil, err
	}
	res, err := a.IncrementalAlterConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic,
		Config: []kafka.ConfigEntry{{Name: "retention.ms", Value: contract.RetentionAfter, IncrementalOperation: kafka.AlterConfigOpTypeSet}}}})
	if err != nil {
		return nil, err
	}
	alterResult := "OK"
	if res[0].Error.Code() != kafka.ErrNoError {
		alterResult = errName(res[0].Error)
	}
	after, err := describe(kafka.ResourceTopic, topic)
	if err != nil {
		return nil, err
	}
	return contract.Observed{"retention_ms_before": before["retention.ms"], "retention_ms_after": after["retention.ms"],
		"cleanup_policy": before["cleanup.policy"], "broker_compression_type": broker["compression.type"][0],
		"alter_api": "incremental_alter_configs", "alter_result": alterResult}, nil
}

func (c *client) ErrorUnknownTopic(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-missing"
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	md, err := a.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, produceErr := c.produceWith(pctx, kafka.ConfigMap{"topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 5000}, topic, 0, 1)
	return contract.Observed{"describe_error": errName(md.Topics[topic].Error), "error": errName(produceErr)}, nil
}

func (c *client) ErrorFencedProducer(ctx context.Context) (contract.Observed, error) {
	topic := c.prefix + "-fenced"
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	conf := kafka.ConfigMap{"transactional.id": c.prefix + "-fenced-tx"}
	var producers []*kafka.Producer
	defer func() {
		for _, p := range producers {
			p.Close()
		}
	}()
	for range 2 {
		p, err := kafka.NewProducer(c.conf(conf))
		if err != nil {
			return nil, err
		}
		producers = append(producers, p)
		if err := p.InitTransactions(ctx); err != nil {
			return nil, err
		}
		if len(producers) == 1 {
			if err := p.BeginTransaction(); err != nil {
				return nil, err
			}
			if _, err := c.write(ctx, p, topic, 0, 1); err != nil {
				return nil, err
			}
		}
	}
	_, err := c.write(ctx, producers[0], topic, 1, 1)
	if err == nil {
		err = producers[0].CommitTransaction(ctx)
	}
	return contract.Observed{"error": errName(err)}, nil
}

func (c *client) ErrorNotAuthorized(ctx context.Context) (contract.Observed, error) {
	if err := contract.RequireAuthorizer(); err != nil {
		return nil, err
	}
	topic := c.prefix + "-denied"
	if err := c.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	res, err := a.CreateACLs(ctx, kafka.ACLBindings{{Type: kafka.ResourceTopic, Name: topic,
		ResourcePatternType: kafka.ResourcePatternTypeLiteral, Principal: "User:ANONYMOUS", Host: "*",
		Operation: kafka.ACLOperationAll, PermissionType: kafka.ACLPermissionTypeDeny}})
	if err != nil {
		return nil, err
	}
	if res[0].Error.Code() != kafka.ErrNoError {
		return nil, res[0].Error
	}
	_, produceErr := c.produceWith(ctx, kafka.ConfigMap{"message.timeout.ms": 5000}, topic, 0, 1)
	return contract.Observed{"error": errName(produceErr)}, nil
}
