package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"
)

const urn = "urn:pulumi:dev::proj::command:local:Command::c"

func props(t *testing.T, m resource.PropertyMap) *structpb.Struct {
	t.Helper()
	s, err := plugin.MarshalProperties(m, marshalOpts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func unprops(t *testing.T, s *structpb.Struct) resource.PropertyMap {
	t.Helper()
	m, err := plugin.UnmarshalProperties(s, marshalOpts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func str(s string) resource.PropertyValue { return resource.NewStringProperty(s) }

func create(t *testing.T, p *commandProvider, in resource.PropertyMap, timeout float64) (resource.PropertyMap, error) {
	t.Helper()
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: urn, Type: commandType, Properties: props(t, in), Timeout: timeout,
	})
	if err != nil {
		return nil, err
	}
	return unprops(t, resp.GetProperties()), nil
}

func update(t *testing.T, olds, news resource.PropertyMap) resource.PropertyMap {
	t.Helper()
	resp, err := (&commandProvider{}).Update(context.Background(), &pulumirpc.UpdateRequest{
		Urn: urn, Type: commandType, Olds: props(t, olds), News: props(t, news),
	})
	if err != nil {
		t.Fatal(err)
	}
	return unprops(t, resp.GetProperties())
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func TestLineLoggerEmitsAFinalLineWithoutNewline(t *testing.T) {
	var lines []string
	var both bytes.Buffer
	l := &lineLogger{emit: func(s string) { lines = append(lines, s) }, on: true, mu: &sync.Mutex{}, both: &both}
	_, _ = l.Write([]byte("first\nsec"))
	_, _ = l.Write([]byte("ond\nlast words"))
	if got := strings.Join(lines, "|"); got != "first|second" {
		t.Fatalf("before flush: %q", got)
	}
	l.flush()
	l.flush()
	if got := strings.Join(lines, "|"); got != "first|second|last words" {
		t.Fatalf("after flush: %q", got)
	}
}

// The engine's Cancel SIGKILLs the interpreter only; its child gets no signal,
// runs to its end, and the operation ends when the child closes the output.
func TestCancelKillsTheShellOnlyAndWaitsForItsChildren(t *testing.T) {
	marks := filepath.Join(t.TempDir(), "marks")
	child := `trap "echo child-signalled >> ` + marks + `" TERM INT HUP; sleep 1.5; echo child-finished >> ` + marks
	script := `trap "echo shell-trapped >> ` + marks + `" TERM INT; sh -c '` + child + `'; echo shell-went-on >> ` + marks
	p := &commandProvider{}
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := create(t, p, resource.PropertyMap{"create": str(script)}, 0)
		errc <- err
	}()
	time.Sleep(400 * time.Millisecond)
	_, _ = p.Cancel(context.Background(), nil)
	var err error
	select {
	case err = <-errc:
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled command never ended")
	}
	if err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("want the shell SIGKILLed, got %v", err)
	}
	if took := time.Since(start); took < 1400*time.Millisecond {
		t.Fatalf("ended after %v, before the child closed its output", took)
	}
	if got := read(t, marks); got != "child-finished\n" {
		t.Fatalf("marks = %q: the shell must die without trapping, the child untouched", got)
	}
	// Cancel holds for later operations too.
	if _, err := create(t, p, resource.PropertyMap{"create": str("sleep 5")}, 0); err == nil {
		t.Fatal("an operation after Cancel must be cancelled")
	}
}

func TestCustomTimeoutsKillTheCommand(t *testing.T) {
	start := time.Now()
	_, err := create(t, &commandProvider{}, resource.PropertyMap{"create": str("exec sleep 30")}, 1)
	if err == nil || !strings.Contains(err.Error(), "customTimeouts") {
		t.Fatalf("want a timeout error, got %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the timeout did not stop the command: %v", took)
	}
}

func TestASecretInputDoesNotMakeStdoutSecret(t *testing.T) {
	out, err := create(t, &commandProvider{}, resource.PropertyMap{
		"create":      str("echo out; echo err >&2"),
		"stdin":       resource.MakeSecret(str("hush")),
		"environment": resource.NewObjectProperty(resource.PropertyMap{"K": resource.MakeSecret(str("v"))}),
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out["stdout"].IsSecret() || out["stderr"].IsSecret() {
		t.Fatalf("stdout/stderr made secret: %v", out)
	}
	if out["stdout"].StringValue() != "out" || out["stderr"].StringValue() != "err" {
		t.Fatalf("outputs: %v", out)
	}
	if !out["stdin"].IsSecret() || !out["environment"].ObjectValue()["K"].IsSecret() {
		t.Fatalf("a secret input echoed as an output must stay secret: %v", out)
	}
}

func TestTheErrorTextCarriesBothStreamsEvenWithLoggingNone(t *testing.T) {
	_, err := create(t, &commandProvider{}, resource.PropertyMap{
		"create":  str("echo to-out; echo to-err >&2; exit 3"),
		"logging": str("none"),
	}, 0)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"exit status 3", "to-out", "to-err", `running "echo to-out`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q not in %q", want, err.Error())
		}
	}
}

const showPrev = `echo "out=${PULUMI_COMMAND_STDOUT-unset} err=${PULUMI_COMMAND_STDERR-unset}" > `

func TestDeleteHonoursAddPreviousOutputInEnv(t *testing.T) {
	for _, add := range []bool{true, false} {
		f := filepath.Join(t.TempDir(), "env")
		state := resource.PropertyMap{
			"delete": str(showPrev + f), "stdout": str("prev-out"), "stderr": str("prev-err"),
			"addPreviousOutputInEnv": resource.NewBoolProperty(add),
		}
		_, err := (&commandProvider{}).Delete(context.Background(), &pulumirpc.DeleteRequest{
			Urn: urn, Type: commandType, Properties: props(t, state),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "out=unset err=unset\n"
		if add {
			want = "out=prev-out err=prev-err\n"
		}
		if got := read(t, f); got != want {
			t.Fatalf("addPreviousOutputInEnv=%v: %q, want %q", add, got, want)
		}
	}
}

func TestAnEmptyPreviousOutputLeavesTheVariableUnset(t *testing.T) {
	f := filepath.Join(t.TempDir(), "env")
	olds := resource.PropertyMap{"create": str("true"), "stdout": str(""), "stderr": str("was-err")}
	update(t, olds, resource.PropertyMap{"create": str("true"), "update": str(showPrev + f)})
	if got := read(t, f); got != "out=unset err=was-err\n" {
		t.Fatalf("got %q", got)
	}
}

func TestAnEmptyUpdateRunsNothing(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ran")
	olds := resource.PropertyMap{"create": str("echo x"), "stdout": str("x")}
	out := update(t, olds, resource.PropertyMap{"create": str("echo created > " + f), "update": str("")})
	if read(t, f) != "" {
		t.Fatal("an empty update ran create")
	}
	if out["stdout"].StringValue() != "" {
		t.Fatalf("stdout of an empty update: %v", out["stdout"])
	}
	// Neither create nor update: nothing runs and the previous output stays.
	out = update(t, olds, resource.PropertyMap{"delete": str("true")})
	if out["stdout"].StringValue() != "x" {
		t.Fatalf("previous stdout lost: %v", out["stdout"])
	}
}

func TestGlobsSupportAlternativesAndClasses(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.log", "sub/e.txt", "sub/x.js"} {
		path := filepath.Join(dir, f)
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string][]string{
		"{a,b}.txt":       {"a.txt", "b.txt"},
		"[ac].txt":        {"a.txt", "c.txt"},
		"[!ac].txt":       {"b.txt"},
		"[a-b].*":         {"a.txt", "b.txt"},
		"*.{txt,log}":     {"a.txt", "b.txt", "c.txt", "d.log"},
		"**.{js,txt}":     {"a.txt", "b.txt", "c.txt", "sub/e.txt", "sub/x.js"},
		"sub/?.{t{x}t,z}": {"sub/e.txt"},
	}
	for pat, want := range cases {
		got, err := matchFiles(dir, []string{pat})
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", pat, got, want)
		}
	}
	got, err := matchFiles(dir, []string{"**", "!{a,sub/x}.*"})
	if err != nil || strings.Join(got, ",") != "b.txt,c.txt,d.log,sub/e.txt" {
		t.Fatalf("exclusion: %v %v", got, err)
	}
	if _, err := matchFiles(dir, []string{"{a,b"}); err == nil {
		t.Fatal("an unclosed brace must be an error")
	}
}

func TestAMissingDirIsReportedAsAChdirError(t *testing.T) {
	_, err := create(t, &commandProvider{}, resource.PropertyMap{
		"create": str("true"), "dir": str("/nonexistent/frutebox"),
	}, 0)
	if err == nil || !strings.Contains(err.Error(), "chdir /nonexistent/frutebox") {
		t.Fatalf("got %v", err)
	}
}

func TestReadAdoptsAnImportedCommand(t *testing.T) {
	resp, err := (&commandProvider{}).Read(context.Background(), &pulumirpc.ReadRequest{Id: "c-1", Urn: urn})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != "c-1" || resp.GetProperties() == nil || resp.GetInputs() == nil {
		t.Fatalf("an import needs the id and (empty) state back: %v", resp)
	}
	state := resource.PropertyMap{"create": str("echo x"), "stdout": str("x")}
	resp, err = (&commandProvider{}).Read(context.Background(), &pulumirpc.ReadRequest{
		Id: "c-1", Urn: urn, Properties: props(t, state),
	})
	if err != nil || !unprops(t, resp.GetProperties()).DeepEquals(state) {
		t.Fatalf("a refresh must return the state unchanged: %v %v", resp, err)
	}
}

// Upstream hangs on a logged line over 64 KiB; this one logs it whole.
func TestALongLoggedLineDoesNotHang(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		out, err := create(t, &commandProvider{}, resource.PropertyMap{
			"create": str(`head -c 200000 /dev/zero | tr '\0' x; echo; echo after`),
		}, 0)
		if err == nil && !strings.HasSuffix(out["stdout"].StringValue(), "\nafter") {
			t.Errorf("stdout tail: %q", out["stdout"].StringValue()[190000:])
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a 200 KB line hung the command")
	}
}
