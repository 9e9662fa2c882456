// Package contract runs the client matrix's scenarios (conformance/matrix/README.md) for one Go
// client: each scenario bounded by its own timeout, one JSON line per scenario on stdout.
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Codecs are the produce_<codec> scenarios' compression codecs, in contract order.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

const (
	RecordCount    = 100
	TxnRecords     = 10
	SecondBatch    = 10
	RetentionAfter = "3600000"
)

// Observed is what a scenario saw that does not depend on the broker it talks to.
type Observed map[string]any

// Unsupported is returned by a scenario this client (version) cannot run.
type Unsupported struct{ Reason string }

func (u Unsupported) Error() string { return u.Reason }

// Client is one Go client library's implementation of the scenarios.
type Client interface {
	Metadata(ctx context.Context) (Observed, error)
	CreateDeleteTopic(ctx context.Context) (Observed, error)
	Produce(ctx context.Context, codec string) (Observed, error)
	GroupConsumeCommit(ctx context.Context) (Observed, error)
	Transactions(ctx context.Context) (Observed, error)
	AdminDescribeConfigs(ctx context.Context) (Observed, error)
	ErrorUnknownTopic(ctx context.Context) (Observed, error)
	ErrorFencedProducer(ctx context.Context) (Observed, error)
	ErrorNotAuthorized(ctx context.Context) (Observed, error)
}

type result struct {
	Scenario string   `json:"scenario"`
	Status   string   `json:"status"`
	Observed Observed `json:"observed"`
	Detail   string   `json:"detail"`
}

// prefix is this run's PREFIX, replaced by the word PREFIX in error texts (observed values must
// not depend on the run).
var prefix string

// Args returns BOOTSTRAP and PREFIX, the program's last two arguments.
func Args(args []string) (string, string) {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: PROGRAM [flags] BOOTSTRAP PREFIX")
		os.Exit(2)
	}
	prefix = args[len(args)-1]
	return args[len(args)-2], prefix
}

// Run runs every scenario in contract order and prints its line; then exits the process.
func Run(c Client) {
	log.SetOutput(os.Stderr)
	timeout := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("MATRIX_SCENARIO_TIMEOUT")); err == nil {
		timeout = v
	}
	type scenario struct {
		name string
		fn   func(context.Context) (Observed, error)
	}
	scenarios := []scenario{{"metadata", c.Metadata}, {"create_delete_topic", c.CreateDeleteTopic}}
	for _, codec := range Codecs {
		codec := codec
		scenarios = append(scenarios, scenario{"produce_" + codec, func(ctx context.Context) (Observed, error) {
			return c.Produce(ctx, codec)
		}})
	}
	scenarios = append(scenarios,
		scenario{"group_consume_commit", c.GroupConsumeCommit},
		scenario{"transactions", c.Transactions},
		scenario{"admin_describe_configs", c.AdminDescribeConfigs},
		scenario{"error_unknown_topic", c.ErrorUnknownTopic},
		scenario{"error_fenced_producer", c.ErrorFencedProducer},
		scenario{"error_not_authorized", c.ErrorNotAuthorized},
	)
	only := map[string]bool{}
	for _, name := range strings.Split(os.Getenv("MATRIX_SCENARIOS"), ",") {
		if name != "" {
			only[name] = true
		}
	}
	out := json.NewEncoder(os.Stdout)
	for _, s := range scenarios {
		if len(only) > 0 && !only[s.name] {
			continue
		}
		_ = out.Encode(runOne(s.name, s.fn, timeout))
	}
	os.Exit(0)
}

func runOne(name string, fn func(context.Context) (Observed, error), timeout time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{name, "fail", Observed{}, fmt.Sprintf("panic: %v", p)}
			}
		}()
		observed, err := fn(ctx)
		var unsupported Unsupported
		switch {
		case errors.As(err, &unsupported):
			done <- result{name, "unsupported", Observed{}, unsupported.Reason}
		case err != nil:
			log.Printf("scenario %s failed: %v", name, err)
			done <- result{name, "fail", Observed{}, fmt.Sprintf("%T: %v", err, err)}
		default:
			if observed == nil {
				observed = Observed{}
			}
			done <- result{name, "pass", observed, ""}
		}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout + 2*time.Second):
		return result{name, "fail", Observed{}, fmt.Sprintf("timeout: not finished within %s", timeout)}
	}
}

// RequireAuthorizer returns Unsupported unless the broker was started with an authorizer.
func RequireAuthorizer() error {
	if os.Getenv("MATRIX_AUTHORIZER") != "1" {
		return Unsupported{"no authorizer"}
	}
	return nil
}

// Record is the i-th record a scenario writes.
func Record(i int) ([]byte, []byte) {
	value := []byte(fmt.Sprintf("value-%d-", i))
	for r := 0; r < 2; r++ {
		for b := 0; b < 256; b++ {
			value = append(value, byte(b))
		}
	}
	return []byte(fmt.Sprintf("key-%d", i)), value
}

// RoundTrips reports whether the (key, value) pairs are Record(start), Record(start+1), ...
func RoundTrips(keys, values [][]byte, start int) bool {
	for i := range keys {
		k, v := Record(start + i)
		if string(keys[i]) != string(k) || string(values[i]) != string(v) {
			return false
		}
	}
	return true
}

// CodeName is Kafka's name of an error code (TOPIC_ALREADY_EXISTS), the canonical form of an error.
func CodeName(code int16) string {
	if code == 0 {
		return "none"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		var k *kerr.Error
		if errors.As(err, &k) {
			return k.Message
		}
	}
	return fmt.Sprintf("error_code_%d", code)
}

// ErrName is the canonical name of err: a Kafka error's name, else its text without addresses.
func ErrName(err error) string {
	if err == nil {
		return "none"
	}
	var k *kerr.Error
	if errors.As(err, &k) {
		return k.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "context.DeadlineExceeded"
	}
	if prefix == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), prefix, "PREFIX")
}

// Wait polls check every 100 ms until it is true or ctx ends.
func Wait(ctx context.Context, check func() bool) bool {
	for {
		if check() {
			return true
		}
		select {
		case <-ctx.Done():
			return check()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
