// Command pulumi-resource-command is a small implementation of the Pulumi
// command provider's local resources (`command:local:Command` and the
// `command:local:run` function), written for frutebox-infra.
//
// Why it exists: the upstream provider module is not served by the Go module
// proxy our machines can reach (see ../../README.md), and the project only uses
// the local resources. It answers to the same type tokens and reports the same
// plugin version as the pulumi-command==1.2.1 Python package, so programs
// written against that package run unchanged. Semantics follow upstream
// v1.2.1 (provider/pkg/provider/local, read for this): nothing runs during
// preview; any input change is an update that runs `update` when it is set
// (even to "", which runs nothing) or else `create`; a `triggers` change is a
// replace; `update` and `delete` see the previous stdout/stderr in
// PULUMI_COMMAND_STDOUT/PULUMI_COMMAND_STDERR, each only when non-empty and
// unless addPreviousOutputInEnv is false; stdout/stderr are never made secret
// because an input is (a program marks them with additionalSecretOutputs);
// `logging` controls only what is echoed, the error text always carries both
// streams; customTimeouts bound each operation. Remote resources
// (`command:remote:*`) are rejected with a clear error.
//
// Cancellation (the engine's Cancel call, a customTimeout) kills the
// interpreter it started with SIGKILL, as upstream does: the command's own
// children get no signal, and the operation ends when they close its output.
// A command that starts children must watch for its parent going away (ours
// does: frutebox_infra/runpod/parent_watch.py).
//
// Deliberate difference: upstream stops reading output after a line longer
// than 64 KiB and then hangs the command; this one logs such a line whole.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/archive"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/asset"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/provider"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// providerVersion is set with -ldflags "-X main.providerVersion=..." to match
// the pulumi-command Python package.
var providerVersion = "1.2.1"

const (
	commandType = "command:local:Command"
	runToken    = "command:local:run"
)

// inputKeys are the inputs of command:local:Command; a change to any of them is an update.
var inputKeys = []resource.PropertyKey{
	"addPreviousOutputInEnv", "archivePaths", "assetPaths", "create", "delete", "dir",
	"environment", "interpreter", "logging", "stdin", "triggers", "update",
}

// outputKeys are what a command produces; an update starts from their previous values.
var outputKeys = []resource.PropertyKey{"stdout", "stderr", "assets", "archive"}

var marshalOpts = plugin.MarshalOptions{
	KeepUnknowns: true, KeepSecrets: true, SkipNulls: true, Label: "command",
}

func main() {
	err := provider.Main("command", func(host *provider.HostClient) (pulumirpc.ResourceProviderServer, error) {
		return &commandProvider{host: host}, nil
	})
	if err != nil {
		cmdutil.ExitError(err.Error())
	}
}

type commandProvider struct {
	pulumirpc.UnimplementedResourceProviderServer
	host *provider.HostClient

	// stopped is closed by Cancel: every running and later command is cancelled.
	initOnce sync.Once
	stopOnce sync.Once
	stopped  chan struct{}
}

func (p *commandProvider) stopChan() chan struct{} {
	p.initOnce.Do(func() { p.stopped = make(chan struct{}) })
	return p.stopped
}

// operation is ctx, also cancelled when the engine calls Cancel and, when
// timeout (seconds, from customTimeouts) is positive, once it has passed.
// Whole seconds, as upstream counts them.
func (p *commandProvider) operation(ctx context.Context, timeout float64) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stopped := p.stopChan()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (p *commandProvider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: providerVersion}, nil
}

func (p *commandProvider) GetSchema(
	context.Context, *pulumirpc.GetSchemaRequest,
) (*pulumirpc.GetSchemaResponse, error) {
	schema, err := schemaJSON()
	if err != nil {
		return nil, err
	}
	return &pulumirpc.GetSchemaResponse{Schema: schema}, nil
}

func (p *commandProvider) CheckConfig(
	_ context.Context, req *pulumirpc.CheckRequest,
) (*pulumirpc.CheckResponse, error) {
	return &pulumirpc.CheckResponse{Inputs: req.GetNews()}, nil
}

func (p *commandProvider) DiffConfig(
	context.Context, *pulumirpc.DiffRequest,
) (*pulumirpc.DiffResponse, error) {
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
}

func (p *commandProvider) Configure(
	context.Context, *pulumirpc.ConfigureRequest,
) (*pulumirpc.ConfigureResponse, error) {
	return &pulumirpc.ConfigureResponse{AcceptSecrets: true, SupportsPreview: true}, nil
}

// Cancel is the engine asking to abort what runs (first Ctrl-C): every running
// and later operation is cancelled, which SIGKILLs its interpreter.
func (p *commandProvider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	stopped := p.stopChan()
	p.stopOnce.Do(func() { close(stopped) })
	return &emptypb.Empty{}, nil
}

func unsupported(typ string) error {
	return status.Errorf(codes.Unimplemented,
		"%s is not supported by the frutebox-infra offline command provider (only %s and %s are)",
		typ, commandType, runToken)
}

func (p *commandProvider) Check(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	if typ := typeOf(req.GetType(), req.GetUrn()); typ != commandType {
		return nil, unsupported(typ)
	}
	news, err := plugin.UnmarshalProperties(req.GetNews(), marshalOpts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CheckResponse{Inputs: req.GetNews(), Failures: validate(news)}, nil
}

// validate reports inputs of the wrong shape, the way a schema-checked provider would.
func validate(m resource.PropertyMap) []*pulumirpc.CheckFailure {
	var failures []*pulumirpc.CheckFailure
	fail := func(k resource.PropertyKey, msg string) {
		failures = append(failures, &pulumirpc.CheckFailure{Property: string(k), Reason: msg})
	}
	for _, k := range []resource.PropertyKey{"create", "update", "delete", "dir", "stdin"} {
		if v, ok := plainValue(m, k); ok && !v.IsComputed() && !v.IsString() {
			fail(k, "must be a string")
		}
	}
	if v, ok := plainValue(m, "logging"); ok && v.IsString() {
		switch v.StringValue() {
		case "stdout", "stderr", "stdoutAndStderr", "none":
		default:
			fail("logging", `must be one of "stdout", "stderr", "stdoutAndStderr", "none"`)
		}
	}
	if v, ok := plainValue(m, "addPreviousOutputInEnv"); ok && !v.IsComputed() && !v.IsBool() {
		fail("addPreviousOutputInEnv", "must be a boolean")
	}
	for _, k := range []resource.PropertyKey{"interpreter", "assetPaths", "archivePaths"} {
		if v, ok := plainValue(m, k); ok && !v.IsComputed() && !v.IsArray() {
			fail(k, "must be a list of strings")
		}
	}
	if v, ok := plainValue(m, "environment"); ok && !v.IsComputed() && !v.IsObject() {
		fail("environment", "must be a map of strings")
	}
	return failures
}

func typeOf(typ, urn string) string {
	if typ != "" {
		return typ
	}
	if u, err := resource.ParseURN(urn); err == nil {
		return string(u.Type())
	}
	return urn
}

func (p *commandProvider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	oldStruct := req.GetOldInputs()
	if oldStruct == nil {
		oldStruct = req.GetOlds()
	}
	olds, err := plugin.UnmarshalProperties(oldStruct, marshalOpts)
	if err != nil {
		return nil, err
	}
	news, err := plugin.UnmarshalProperties(req.GetNews(), marshalOpts)
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	for _, k := range req.GetIgnoreChanges() {
		ignored[k] = true
	}
	resp := &pulumirpc.DiffResponse{
		Changes:         pulumirpc.DiffResponse_DIFF_NONE,
		DetailedDiff:    map[string]*pulumirpc.PropertyDiff{},
		HasDetailedDiff: true,
	}
	for _, k := range inputKeys {
		if ignored[string(k)] {
			continue
		}
		o, hasOld := olds[k]
		n, hasNew := news[k]
		if hasOld && hasNew && !n.ContainsUnknowns() && o.DeepEquals(n) {
			continue
		}
		if !hasOld && !hasNew {
			continue
		}
		kind := pulumirpc.PropertyDiff_UPDATE
		switch {
		case !hasOld:
			kind = pulumirpc.PropertyDiff_ADD
		case !hasNew:
			kind = pulumirpc.PropertyDiff_DELETE
		}
		if k == "triggers" {
			kind += pulumirpc.PropertyDiff_ADD_REPLACE - pulumirpc.PropertyDiff_ADD
			resp.Replaces = append(resp.Replaces, string(k))
		}
		resp.Changes = pulumirpc.DiffResponse_DIFF_SOME
		resp.Diffs = append(resp.Diffs, string(k))
		resp.DetailedDiff[string(k)] = &pulumirpc.PropertyDiff{Kind: kind, InputDiff: true}
	}
	return resp, nil
}

func (p *commandProvider) Create(ctx context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	if typ := typeOf(req.GetType(), req.GetUrn()); typ != commandType {
		return nil, unsupported(typ)
	}
	inputs, err := plugin.UnmarshalProperties(req.GetProperties(), marshalOpts)
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if name == "" {
		if u, perr := resource.ParseURN(req.GetUrn()); perr == nil {
			name = u.Name()
		}
	}
	id, err := resource.NewUniqueHex(name, 8, 0)
	if err != nil {
		return nil, err
	}
	if req.GetPreview() {
		return &pulumirpc.CreateResponse{Id: id, Properties: mustMarshal(previewOutputs(inputs))}, nil
	}
	ctx, done := p.operation(ctx, req.GetTimeout())
	defer done()
	outputs := inputs.Copy()
	outputs["stdout"], outputs["stderr"] = resource.NewStringProperty(""), resource.NewStringProperty("")
	if _, ok := plainValue(inputs, "create"); ok {
		outputs, err = p.run(ctx, resource.URN(req.GetUrn()), inputs, "create", outputs)
		if err != nil {
			return nil, err
		}
	}
	props, err := plugin.MarshalProperties(outputs, marshalOpts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
}

func (p *commandProvider) Update(ctx context.Context, req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	olds, err := plugin.UnmarshalProperties(req.GetOlds(), marshalOpts)
	if err != nil {
		return nil, err
	}
	news, err := plugin.UnmarshalProperties(req.GetNews(), marshalOpts)
	if err != nil {
		return nil, err
	}
	if req.GetPreview() {
		return &pulumirpc.UpdateResponse{Properties: mustMarshal(previewOutputs(news))}, nil
	}
	// The new inputs with the previous outputs, which the command sees.
	outputs := news.Copy()
	for _, k := range outputKeys {
		if v, ok := olds[k]; ok {
			outputs[k] = v
		}
	}
	// `update` when it is set at all (an empty one runs nothing), else `create`,
	// else nothing runs and the previous outputs stay.
	which := resource.PropertyKey("")
	for _, k := range []resource.PropertyKey{"update", "create"} {
		if _, ok := plainValue(news, k); ok {
			which = k
			break
		}
	}
	if which != "" {
		ctx, done := p.operation(ctx, req.GetTimeout())
		defer done()
		if outputs, err = p.run(ctx, resource.URN(req.GetUrn()), news, which, outputs); err != nil {
			return nil, err
		}
	}
	props, err := plugin.MarshalProperties(outputs, marshalOpts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: props}, nil
}

func (p *commandProvider) Delete(ctx context.Context, req *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	state, err := plugin.UnmarshalProperties(req.GetProperties(), marshalOpts)
	if err != nil {
		return nil, err
	}
	if _, ok := plainValue(state, "delete"); ok {
		ctx, done := p.operation(ctx, req.GetTimeout())
		defer done()
		if _, err := p.run(ctx, resource.URN(req.GetUrn()), state, "delete", state.Copy()); err != nil {
			return nil, err
		}
	}
	return &emptypb.Empty{}, nil
}

// Read returns the state and inputs it is given, as upstream's does: a refresh
// changes nothing, and `pulumi import` adopts a command with empty state
// (present, so the engine does not call the resource missing).
func (p *commandProvider) Read(_ context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	if typ := typeOf("", req.GetUrn()); typ != commandType {
		return nil, unsupported(typ)
	}
	props, inputs := req.GetProperties(), req.GetInputs()
	if props == nil {
		props = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if inputs == nil {
		inputs = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	return &pulumirpc.ReadResponse{Id: req.GetId(), Properties: props, Inputs: inputs}, nil
}

func (p *commandProvider) Invoke(ctx context.Context, req *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	if req.GetTok() != runToken {
		return nil, unsupported(req.GetTok())
	}
	args, err := plugin.UnmarshalProperties(req.GetArgs(), marshalOpts)
	if err != nil {
		return nil, err
	}
	ctx, done := p.operation(ctx, 0)
	defer done()
	outputs, err := p.run(ctx, "", args, "command", args.Copy())
	if err != nil {
		return nil, err
	}
	ret, err := plugin.MarshalProperties(outputs, marshalOpts)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.InvokeResponse{Return: ret}, nil
}

func mustMarshal(m resource.PropertyMap) *structpb.Struct {
	s, err := plugin.MarshalProperties(m, marshalOpts)
	if err != nil {
		panic(err)
	}
	return s
}

// previewOutputs is what a preview reports: the inputs, with outputs unknown.
func previewOutputs(inputs resource.PropertyMap) resource.PropertyMap {
	out := inputs.Copy()
	unknown := resource.MakeComputed(resource.NewStringProperty(""))
	out["stdout"], out["stderr"] = unknown, unknown
	if _, ok := inputs["assetPaths"]; ok {
		out["assets"] = unknown
	}
	if _, ok := inputs["archivePaths"]; ok {
		out["archive"] = unknown
	}
	return out
}

// plainValue returns m[k] with any secret wrapper removed.
func plainValue(m resource.PropertyMap, k resource.PropertyKey) (resource.PropertyValue, bool) {
	v, ok := m[k]
	if !ok || v.IsNull() {
		return resource.PropertyValue{}, false
	}
	for v.IsSecret() {
		v = v.SecretValue().Element
	}
	return v, true
}

func stringInput(m resource.PropertyMap, k resource.PropertyKey) (string, error) {
	v, ok := plainValue(m, k)
	if !ok {
		return "", nil
	}
	if !v.IsString() {
		return "", fmt.Errorf("%s must be a string", k)
	}
	return v.StringValue(), nil
}

func stringList(m resource.PropertyMap, k resource.PropertyKey) ([]string, error) {
	v, ok := plainValue(m, k)
	if !ok {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, fmt.Errorf("%s must be a list of strings", k)
	}
	var out []string
	for _, e := range v.ArrayValue() {
		for e.IsSecret() {
			e = e.SecretValue().Element
		}
		if !e.IsString() {
			return nil, fmt.Errorf("%s must be a list of strings", k)
		}
		out = append(out, e.StringValue())
	}
	return out, nil
}

// run executes inputs[which] and returns state with the new stdout/stderr
// (and assets/archive). state holds the previous outputs, which the command
// sees in its environment; on failure the error carries both streams.
func (p *commandProvider) run(
	ctx context.Context, urn resource.URN, inputs resource.PropertyMap, which resource.PropertyKey,
	state resource.PropertyMap,
) (resource.PropertyMap, error) {
	script, err := stringInput(inputs, which)
	if err != nil {
		return nil, err
	}
	dir, err := stringInput(inputs, "dir")
	if err != nil {
		return nil, err
	}
	stdin, err := stringInput(inputs, "stdin")
	if err != nil {
		return nil, err
	}
	logging, err := stringInput(inputs, "logging")
	if err != nil {
		return nil, err
	}
	if logging == "" {
		logging = "stdoutAndStderr"
	}
	interpreter, err := stringList(inputs, "interpreter")
	if err != nil {
		return nil, err
	}
	if len(interpreter) == 0 {
		interpreter = []string{"/bin/sh", "-c"}
	}

	env := os.Environ()
	if v, ok := plainValue(inputs, "environment"); ok && v.IsObject() {
		keys := v.ObjectValue().StableKeys()
		for _, k := range keys {
			e := v.ObjectValue()[k]
			for e.IsSecret() {
				e = e.SecretValue().Element
			}
			if !e.IsString() {
				return nil, fmt.Errorf("environment[%s] must be a string", k)
			}
			env = append(env, string(k)+"="+e.StringValue())
		}
	}
	addPrev := true
	if v, ok := plainValue(inputs, "addPreviousOutputInEnv"); ok && v.IsBool() {
		addPrev = v.BoolValue()
	}
	if addPrev {
		// Only what is there: an empty previous stdout leaves the variable unset.
		if prevOut, _ := stringInput(state, "stdout"); prevOut != "" {
			env = append(env, "PULUMI_COMMAND_STDOUT="+prevOut)
		}
		if prevErr, _ := stringInput(state, "stderr"); prevErr != "" {
			env = append(env, "PULUMI_COMMAND_STDERR="+prevErr)
		}
	}

	stdout, stderr, err := p.exec(ctx, urn, interpreter, script, dir, stdin, env, logging)
	if err != nil {
		return nil, err
	}
	out := state.Copy()
	if which == "delete" {
		return out, nil
	}
	if err := collectFiles(inputs, dir, out); err != nil {
		return nil, err
	}
	// Plain strings even when an input is secret: upstream does not propagate
	// secretness to stdout/stderr (a program asks with additionalSecretOutputs).
	out["stdout"], out["stderr"] = resource.NewStringProperty(stdout), resource.NewStringProperty(stderr)
	return out, nil
}

// exec runs one command, streaming its output lines to the engine as status
// logs. A cancelled ctx SIGKILLs the interpreter only (exec's default), and
// exec returns once every holder of its output has closed it, as upstream's.
func (p *commandProvider) exec(
	ctx context.Context, urn resource.URN, interpreter []string, script, dir, stdin string,
	env []string, logging string,
) (string, string, error) {
	args := append(append([]string{}, interpreter[1:]...), script)
	cmd := exec.CommandContext(ctx, interpreter[0], args...)
	cmd.Env = env
	cmd.Dir = dir
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var outBuf, errBuf, both bytes.Buffer
	var mu sync.Mutex
	logOut := logging == "stdout" || logging == "stdoutAndStderr"
	logErr := logging == "stderr" || logging == "stdoutAndStderr"
	// A cancelled command still reports its cleanup, so logging outlives ctx.
	logCtx := context.WithoutCancel(ctx)
	emit := func(line string) {
		if p.host != nil && urn != "" {
			_ = p.host.LogStatus(logCtx, diag.Info, urn, line)
		}
	}
	outLog := &lineLogger{emit: emit, on: logOut, mu: &mu, both: &both}
	errLog := &lineLogger{emit: emit, on: logErr, mu: &mu, both: &both}
	cmd.Stdout = io.MultiWriter(&outBuf, outLog)
	cmd.Stderr = io.MultiWriter(&errBuf, errLog)
	err := cmd.Run()
	outLog.flush()
	errLog.flush()
	stdout := strings.TrimSuffix(outBuf.String(), "\n")
	stderr := strings.TrimSuffix(errBuf.String(), "\n")
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w (customTimeouts)", err)
		}
		// Both streams, whatever `logging` says: upstream's error text.
		msg := fmt.Sprintf("%v: running %q:\n%s", err, script, both.String())
		return stdout, stderr, status.Error(codes.Unknown, msg)
	}
	return stdout, stderr, nil
}

// lineLogger passes each complete output line to emit (the engine's status log)
// when on, and keeps every byte in both (for the error message) always.
type lineLogger struct {
	emit func(line string)
	on   bool
	mu   *sync.Mutex
	both *bytes.Buffer
	part []byte
}

// flush emits a last line that did not end in a newline.
func (l *lineLogger) flush() {
	if len(l.part) > 0 {
		l.emit(string(l.part))
		l.part = nil
	}
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.both.Write(b)
	l.mu.Unlock()
	if !l.on {
		return len(b), nil
	}
	l.part = append(l.part, b...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := string(l.part[:i])
		l.part = l.part[i+1:]
		l.emit(line)
	}
	return len(b), nil
}

// collectFiles fills "assets"/"archive" from assetPaths/archivePaths globs relative to dir.
func collectFiles(inputs resource.PropertyMap, dir string, out resource.PropertyMap) error {
	for _, spec := range []struct {
		in, out resource.PropertyKey
	}{{"assetPaths", "assets"}, {"archivePaths", "archive"}} {
		patterns, err := stringList(inputs, spec.in)
		if err != nil {
			return err
		}
		if patterns == nil {
			continue
		}
		paths, err := matchFiles(dir, patterns)
		if err != nil {
			return err
		}
		assets := map[string]any{}
		props := resource.PropertyMap{}
		for _, rel := range paths {
			a, err := asset.FromPath(filepath.Join(dir, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			assets[rel] = a
			props[resource.PropertyKey(rel)] = resource.NewAssetProperty(a)
		}
		if spec.out == "assets" {
			out["assets"] = resource.NewObjectProperty(props)
			continue
		}
		arch, err := archive.FromAssets(assets)
		if err != nil {
			return err
		}
		out["archive"] = resource.NewArchiveProperty(arch)
	}
	return nil
}

// matchFiles applies upstream's glob rules: `*` stays within a path segment,
// `**` crosses segments, `!pattern` excludes, rules apply in order, files only.
func matchFiles(dir string, patterns []string) ([]string, error) {
	type rule struct {
		re      *regexp.Regexp
		exclude bool
	}
	var rules []rule
	for _, pat := range patterns {
		exclude := strings.HasPrefix(pat, "!")
		pat = strings.TrimPrefix(pat, "!")
		expr, err := globToRegexp(pat)
		if err != nil {
			return nil, fmt.Errorf("bad glob %q: %w", pat, err)
		}
		re, err := regexp.Compile("^" + expr + "$")
		if err != nil {
			return nil, fmt.Errorf("bad glob %q: %w", pat, err)
		}
		rules = append(rules, rule{re, exclude})
	}
	root := dir
	if root == "" {
		root = "."
	}
	var matched []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		keep := false
		for _, r := range rules {
			if r.re.MatchString(rel) {
				keep = !r.exclude
			}
		}
		if keep {
			matched = append(matched, rel)
		}
		return nil
	})
	sort.Strings(matched)
	return matched, err
}

// globToRegexp translates the glob syntax upstream accepts (gobwas/glob with
// '/' as separator): `*` within a segment, `**` across segments, `?` one
// non-separator character, `[ab]`/`[a-z]` and `[!ab]` classes, `{a,b}`
// alternatives (nestable) and `\` escapes.
func globToRegexp(glob string) (string, error) {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if i+1 < len(glob) && glob[i+1] == '*' {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				return "", fmt.Errorf("unclosed '[' at %d", i)
			}
			class := glob[i+1 : i+1+end]
			neg := strings.HasPrefix(class, "!")
			class = strings.TrimPrefix(class, "!")
			if class == "" {
				return "", fmt.Errorf("empty character class at %d", i)
			}
			b.WriteByte('[')
			if neg {
				b.WriteByte('^')
			}
			for j := 0; j < len(class); j++ {
				if class[j] == '-' && j > 0 && j < len(class)-1 {
					b.WriteByte('-')
					continue
				}
				b.WriteString(regexp.QuoteMeta(string(class[j])))
			}
			b.WriteByte(']')
			i += end + 1
		case '{':
			depth++
			b.WriteString("(?:")
		case ',':
			if depth > 0 {
				b.WriteByte('|')
			} else {
				b.WriteString(",")
			}
		case '}':
			if depth == 0 {
				return "", fmt.Errorf("unopened '}' at %d", i)
			}
			depth--
			b.WriteByte(')')
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(string(glob[i])))
			} else {
				b.WriteString(regexp.QuoteMeta("\\"))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return "", errors.New("unclosed '{'")
	}
	return b.String(), nil
}

var _ pulumirpc.ResourceProviderServer = (*commandProvider)(nil)
