// Command franz runs the client matrix's scenarios with franz-go (kgo + kadm).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kafkapy/conformance/matrix/go/internal/contract"
)

type franz struct{ bootstrap, prefix string }

func main() {
	bootstrap, prefix := contract.Args(os.Args[1:])
	contract.Run(&franz{bootstrap, prefix})
}

func (f *franz) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.bootstrap), kgo.RequestTimeoutOverhead(5 * time.Second)}, opts...)...)
}

func (f *franz) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func (f *franz) setupTopic(ctx context.Context, topic string) error {
	adm, cl, err := f.admin()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

func (f *franz) write(ctx context.Context, topic string, start, count int, opts ...kgo.Opt) ([]int64, error) {
	cl, err := f.client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	records := make([]*kgo.Record, 0, count)
	for i := start; i < start+count; i++ {
		k, v := contract.Record(i)
		records = append(records, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v,
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	results := cl.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	offsets := make([]int64, 0, count)
	for _, r := range results {
		offsets = append(offsets, r.Record.Offset)
	}
	return offsets, nil
}

// read polls cl until it has count records, ctx ends, or (settle) nothing more arrives for a while.
func read(ctx context.Context, cl *kgo.Client, count int, settle time.Duration) ([]*kgo.Record, error) {
	var records []*kgo.Record
	for len(records) < count || settle > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return records, fe.Err
			}
		}
		got := fetches.Records()
		records = append(records, got...)
		if ctx.Err() != nil {
			break
		}
		if len(records) >= count && len(got) == 0 {
			break
		}
	}
	return records, nil
}

func (f *franz) readAssigned(ctx context.Context, topic string, count int, opts ...kgo.Opt) ([]*kgo.Record, error) {
	cl, err := f.client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return read(ctx, cl, count, time.Second)
}

func keysValues(records []*kgo.Record) ([][]byte, [][]byte) {
	var keys, values [][]byte
	for _, r := range records {
		keys, values = append(keys, r.Key), append(values, r.Value)
	}
	return keys, values
}

func (f *franz) Metadata(ctx context.Context) (contract.Observed, error) {
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	return contract.Observed{"brokers": len(md.Brokers), "controller": md.Controller >= 0, "topics_listed": md.Topics != nil}, nil
}

func (f *franz) CreateDeleteTopic(ctx context.Context) (contract.Observed, error) {
	topic := f.prefix + "-created"
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, err
	}
	var partitions int
	contract.Wait(ctx, func() bool {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil && details[topic].Err == nil {
			partitions = len(details[topic].Partitions)
		}
		return partitions > 0
	})
	again, err := adm.CreateTopics(ctx, 3, 1, nil, topic)
	if err != nil {
		return nil, err
	}
	deleted, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		return nil, err
	}
	gone := contract.Wait(ctx, func() bool {
		details, err := adm.ListTopics(ctx)
		return err == nil && !details.Has(topic)
	})
	return contract.Observed{"partitions": partitions, "create_twice_error": contract.ErrName(again[topic].Err), "gone_after_delete": gone}, nil
}

func codecOf(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (f *franz) Produce(ctx context.Context, codec string) (contract.Observed, error) {
	topic := f.prefix + "-produce-" + codec
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	// franz-go's producer is idempotent with acks=all by default.
	offsets, err := f.write(ctx, topic, 0, contract.RecordCount, kgo.ProducerBatchCompression(codecOf(codec)))
	if err != nil {
		return nil, err
	}
	records, err := f.readAssigned(ctx, topic, contract.RecordCount)
	if err != nil {
		return nil, err
	}
	keys, values := keysValues(records)
	headers := true
	for i, r := range records {
		headers = headers && len(r.Headers) == 1 && r.Headers[0].Key == "i" && string(r.Headers[0].Value) == fmt.Sprint(i)
	}
	return contract.Observed{"first_offset": offsets[0], "last_offset": offsets[len(offsets)-1], "read": len(records),
		"round_trip": contract.RoundTrips(keys, values, 0), "idempotent": true, "headers_round_trip": headers}, nil
}

func (f *franz) GroupConsumeCommit(ctx context.Context) (contract.Observed, error) {
	topic, group := f.prefix+"-group", f.prefix+"-g"
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	if _, err := f.write(ctx, topic, 0, contract.RecordCount); err != nil {
		return nil, err
	}
	consume := func(count int) ([]*kgo.Record, error) {
		cl, err := f.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		records, err := read(ctx, cl, count, 0)
		if err != nil {
			return nil, err
		}
		return records, cl.CommitUncommittedOffsets(ctx)
	}
	first, err := consume(contract.RecordCount)
	if err != nil {
		return nil, err
	}
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	committed, _ := offsets.Lookup(topic, 0)
	if _, err := f.write(ctx, topic, contract.RecordCount, contract.SecondBatch); err != nil {
		return nil, err
	}
	later, err := consume(contract.SecondBatch)
	if err != nil {
		return nil, err
	}
	observed := contract.Observed{"read": len(first), "committed": committed.At, "second_read": len(later), "second_first_offset": nil}
	if len(later) > 0 {
		observed["second_first_offset"] = later[0].Offset
	}
	keys, values := keysValues(later)
	observed["second_round_trip"] = contract.RoundTrips(keys, values, contract.RecordCount)
	return observed, nil
}

func (f *franz) Transactions(ctx context.Context) (contract.Observed, error) {
	topic := f.prefix + "-txn"
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	cl, err := f.client(kgo.TransactionalID(f.prefix+"-tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for _, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
		for i := 0; i < contract.TxnRecords; i++ {
			k, v := contract.Record(i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: k, Value: v}).FirstErr(); err != nil {
				return nil, err
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return nil, err
		}
	}
	committed, err := f.readAssigned(ctx, topic, contract.TxnRecords, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	uncommitted, err := f.readAssigned(ctx, topic, 2*contract.TxnRecords, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		return nil, err
	}
	return contract.Observed{"read_committed": len(committed), "read_uncommitted": len(uncommitted)}, nil
}

func valueSource(configs kadm.ResourceConfigs, name, key string) ([]string, error) {
	rc, err := configs.On(name, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			value := ""
			if c.Value != nil {
				value = *c.Value
			}
			return []string{value, c.Source.String()}, nil
		}
	}
	return nil, fmt.Errorf("%s has no config %s", name, key)
}

func (f *franz) AdminDescribeConfigs(ctx context.Context) (contract.Observed, error) {
	topic := f.prefix + "-configs"
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	before, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	broker, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		return nil, err
	}
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms",
		Value: kadm.StringPtr(contract.RetentionAfter)}}, topic)
	if err != nil {
		return nil, err
	}
	alterResult := "OK"
	for _, r := range altered {
		if r.Err != nil {
			alterResult = contract.ErrName(r.Err)
		}
	}
	after, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	observed := contract.Observed{"alter_result": alterResult, "alter_api": "incremental_alter_configs"}
	for key, lookup := range map[string]func() ([]string, error){
		"retention_ms_before": func() ([]string, error) { return valueSource(before, topic, "retention.ms") },
		"retention_ms_after":  func() ([]string, error) { return valueSource(after, topic, "retention.ms") },
		"cleanup_policy":      func() ([]string, error) { return valueSource(before, topic, "cleanup.policy") },
	} {
		v, err := lookup()
		if err != nil {
			return nil, err
		}
		observed[key] = v
	}
	compression, err := valueSource(broker, "1", "compression.type")
	if err != nil {
		return nil, err
	}
	observed["broker_compression_type"] = compression[0]
	return observed, nil
}

func (f *franz) ErrorUnknownTopic(ctx context.Context) (contract.Observed, error) {
	topic := f.prefix + "-missing"
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	// Auto-creation is off in kgo unless AllowAutoTopicCreation is set.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, produceErr := f.write(pctx, topic, 0, 1, kgo.UnknownTopicRetries(2))
	return contract.Observed{"describe_error": contract.ErrName(details[topic].Err), "error": contract.ErrName(produceErr)}, nil
}

func (f *franz) ErrorFencedProducer(ctx context.Context) (contract.Observed, error) {
	topic := f.prefix + "-fenced"
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	txnID := f.prefix + "-fenced-tx"
	produce := func(cl *kgo.Client, value string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}).FirstErr()
	}
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for range 2 {
		cl, err := f.client(kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
		// kgo initializes the producer id on the first produce.
		if err := produce(cl, "first"); err != nil {
			return nil, err
		}
	}
	err := produce(clients[0], "again")
	if err == nil {
		err = clients[0].EndTransaction(ctx, kgo.TryCommit)
	}
	return contract.Observed{"error": contract.ErrName(err)}, nil
}

func (f *franz) ErrorNotAuthorized(ctx context.Context) (contract.Observed, error) {
	if err := contract.RequireAuthorizer(); err != nil {
		return nil, err
	}
	topic := f.prefix + "-denied"
	if err := f.setupTopic(ctx, topic); err != nil {
		return nil, err
	}
	adm, cl, err := f.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	acls := kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).
		Deny("User:ANONYMOUS").DenyHosts("*").Operations(kadm.OpAll)
	results, err := adm.CreateACLs(ctx, acls)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, produceErr := f.write(pctx, topic, 0, 1)
	return contract.Observed{"error": contract.ErrName(produceErr)}, nil
}
