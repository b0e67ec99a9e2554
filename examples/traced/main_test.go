package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the whole demo against the embedded Redis and checks the
// story it tells, the traces' shape and the metrics.
func TestRun(t *testing.T) {
	t.Setenv("REDIS_URL", "") // the embedded Redis, whatever the environment says
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, logs bytes.Buffer
	err := run(ctx, &out, &logs)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), logs.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	text := out.String()
	for _, want := range []string{
		"started an embedded Redis",
		`client: GET /jobs/report?ms=200 -> 200 job on "report" done`,
		`client: GET /jobs/doomed?ms=3000 -> 409 lease lost`,
		"operator: SET tenure:{doomed}",
		// The stdout exporters' JSON.
		`"Name":"tenure.lease.acquire"`,
		`"Name":"tenure.lease.hold.duration"`,
		// Metrics.
		"tenure.lease.acquire.duration (s)\n    {tenure.lease.acquire.result=acquired} count=4 ",
		"tenure.lease.wait.duration (s)\n    {tenure.lease.acquire.result=acquired} count=1 ",
		"tenure.lease.held ({lease})\n    {} 0\n",
		"tenure.lease.losses ({lease})\n    {tenure.lease.loss.cause=taken_over} 1\n",
		"{tenure.lease.end.cause=released} count=3 ",
		"{tenure.lease.end.cause=lost} count=1 ",
		"clean finish",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("stdout does not mention %q", want)
		}
	}
	// Each request is one trace: client, server, then the acquire span with
	// the hold span and the job under it, and the release under the server.
	tree := regexp.MustCompile(`(?m)^  GET /jobs/\{name\} \(client\) .*\n` +
		`    GET /jobs/\{name\} \(server\) .*\n` +
		`      tenure\.lease\.acquire .*name=(\w+) .*acquire\.result=acquired.*\n` +
		`(        (tenure\.lease\.hold|job) .*\n){2}` +
		`      tenure\.lease\.release .*name=(\w+).*\n`)
	if n := len(tree.FindAllString(text, -1)); n != 4 {
		t.Errorf("%d traces of the expected shape, want 4", n)
	}
	if !regexp.MustCompile(`acquire .*name=shared acquire\.attempts=([2-9]|\d\d+) `).MatchString(text) {
		t.Error("no acquisition of \"shared\" waited")
	}
	if !regexp.MustCompile(`tenure\.lease\.hold .*name=doomed .*end\.cause=lost event=tenure\.lease\.lost status=Error`).MatchString(text) {
		t.Error("the lost lease's hold span does not show the loss")
	}
	if !strings.Contains(logs.String(), `level=WARN msg="tenure: lease lost" name=doomed`) {
		t.Error("the library logged no lease-lost warning")
	}
}
