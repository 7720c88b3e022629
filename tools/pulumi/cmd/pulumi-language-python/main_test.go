package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test start this package's main() as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("FRUTEBOX_TEST_RUN_HOST") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// A host whose starter is gone exits by itself (seen before: alive for an hour).
func TestTheHostExitsWhenTheProcessThatStartedItIsGone(t *testing.T) {
	// The shell starts the host in the background, prints its pid and exits.
	cmd := exec.Command("sh", "-c", `"$0" & echo $!; sleep 1`, os.Args[0])
	cmd.Env = append(os.Environ(), "FRUTEBOX_TEST_RUN_HOST=1")
	out := make(chan string, 1)
	go func() {
		b, _ := cmd.Output() // EOF only once the host, which shares stdout, has exited
		out <- string(b)
	}()
	select {
	case text := <-out:
		lines := strings.Fields(text)
		if len(lines) < 2 {
			t.Fatalf("want the pid and the port, got %q", text)
		}
	case <-time.After(15 * time.Second):
		if cmd.Process != nil {
			t.Log("host still running; killing the test's children")
		}
		t.Fatal("the host outlived its starter by 15 s")
	}
}

func TestWatchParentNoticesAChangedParent(t *testing.T) {
	gone := make(chan struct{})
	go watchParent(context.Background(), os.Getppid()+1, 10*time.Millisecond, func() { close(gone) })
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("a changed parent id went unnoticed")
	}
	called := false
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	watchParent(ctx, os.Getppid(), 10*time.Millisecond, func() { called = true })
	if called {
		t.Fatal("the live parent was taken for gone")
	}
}

// A cancelled Run interrupts its program (SIGINT), so it can end cleanly.
func TestACancelledProgramGetsSIGINT(t *testing.T) {
	marks := filepath.Join(t.TempDir(), "marks")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "sh", "-c",
		`trap 'echo interrupted > `+marks+`; exit 130' INT; echo ready >> `+marks+`.ready; while :; do sleep 0.05; done`)
	interruptOnCancel(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(marks + ".ready"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	err := cmd.Wait()
	b, _ := os.ReadFile(marks)
	if string(b) != "interrupted\n" {
		t.Fatalf("program did not see SIGINT: %q (wait: %v)", b, err)
	}
}

func TestAProgramIgnoringSIGINTIsKilledAfterTheGrace(t *testing.T) {
	saved := programGrace
	programGrace = 300 * time.Millisecond
	defer func() { programGrace = saved }()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "sh", "-c", `trap '' INT; while :; do sleep 0.05; done`)
	interruptOnCancel(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cancel()
	_ = cmd.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("not killed after the grace: %v", took)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err == nil {
		t.Fatalf("pid %s still exists", strconv.Itoa(cmd.Process.Pid))
	}
}
