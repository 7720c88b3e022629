package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

func collect() (*lineLogger, *[]string) {
	var lines []string
	var both bytes.Buffer
	l := &lineLogger{emit: func(s string) { lines = append(lines, s) }, on: true, mu: &sync.Mutex{}, both: &both}
	return l, &lines
}

func TestLineLoggerEmitsAFinalLineWithoutNewline(t *testing.T) {
	l, lines := collect()
	_, _ = l.Write([]byte("first\nsec"))
	_, _ = l.Write([]byte("ond\nlast words"))
	if got := strings.Join(*lines, "|"); got != "first|second" {
		t.Fatalf("before flush: %q", got)
	}
	l.flush()
	l.flush()
	if got := strings.Join(*lines, "|"); got != "first|second|last words" {
		t.Fatalf("after flush: %q", got)
	}
}

// trapScript says "ready", then loops until SIGTERM, on which it cleans up.
const trapScript = `trap 'echo cleaned-up; exit 3' TERM; echo ready; while :; do sleep 0.05; done`

func runUntilCancelled(t *testing.T, p *commandProvider, script string, cancel func()) (string, time.Duration) {
	t.Helper()
	type result struct {
		out resource.PropertyMap
		err error
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		inputs := resource.PropertyMap{"create": resource.NewStringProperty(script)}
		out, err := p.run(ctx, "", inputs, "create", nil)
		done <- result{out, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if cancel == nil {
		stop()
	} else {
		cancel()
	}
	select {
	case r := <-done:
		if r.err == nil {
			t.Fatalf("a cancelled command must fail")
		}
		return r.err.Error(), time.Since(start)
	case <-time.After(20 * time.Second):
		t.Fatalf("the cancelled command did not end")
	}
	return "", 0
}

func TestACancelledCommandGetsSIGTERMAndTimeToCleanUp(t *testing.T) {
	msg, took := runUntilCancelled(t, &commandProvider{}, trapScript, nil)
	if !strings.Contains(msg, "cleaned-up") {
		t.Fatalf("no SIGTERM cleanup in %q", msg)
	}
	if took > 10*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestTheEngineCancelCallCancelsRunningCommands(t *testing.T) {
	p := &commandProvider{}
	msg, _ := runUntilCancelled(t, p, trapScript, func() { _, _ = p.Cancel(context.Background(), nil) })
	if !strings.Contains(msg, "cleaned-up") {
		t.Fatalf("no SIGTERM cleanup in %q", msg)
	}
}

func TestACommandIgnoringSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	saved := cancelGrace
	cancelGrace = 300 * time.Millisecond
	defer func() { cancelGrace = saved }()
	_, took := runUntilCancelled(t, &commandProvider{}, `trap '' TERM; while :; do sleep 0.05; done`, nil)
	if took > 5*time.Second {
		t.Fatalf("SIGKILL after the grace did not come: took %v", took)
	}
}
