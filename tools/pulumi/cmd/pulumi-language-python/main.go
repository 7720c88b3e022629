// Command pulumi-language-python is a small Pulumi language host for Python
// programs, written for frutebox-infra.
//
// Why it exists: the upstream host lives in its own, untagged Go module that the
// module proxy our machines can reach does not serve (see ../../README.md). This
// host implements the part of the LanguageRuntime protocol that the CLI needs to
// preview, update and destroy a Python program: it resolves the interpreter with
// the SDK's own python/toolchain package (so `runtime.options.virtualenv` and
// `toolchain` in Pulumi.yaml behave as upstream), and runs the SDK's
// `pulumi-language-python-exec` script, which must sit next to this binary.
//
// Lifetime, as upstream's: it stops serving on SIGINT/SIGTERM and when the
// engine stops answering its health check (every healthInterval); when a Run
// is cancelled (the engine aborting the update, or this host stopping) the
// program gets SIGINT, and SIGKILL after programGrace. Beyond upstream, it also
// stops within a second of the process that started it exiting (the CLI
// killed outright), rather than after the next health check.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// bailExitCode is what pulumi-language-python-exec exits with after it has
// already shown the user an actionable error.
const bailExitCode = 32

// pluginScript lists the Python packages that ship a pulumi-plugin.json, which
// is how Pulumi resource packages announce the provider plugin they need.
const pluginScript = `
import importlib.metadata as md, json
out = []
for d in md.distributions():
    for f in (d.files or ()):
        if f.name != "pulumi-plugin.json":
            continue
        try:
            data = json.loads(f.read_text())
        except Exception:
            continue
        if not data.get("resource", False):
            continue
        name = data.get("name") or d.metadata["Name"].replace("_", "-")
        for prefix in ("pulumi-", "pulumi_"):
            if name.startswith(prefix):
                name = name[len(prefix):]
        out.append({"name": name, "version": data.get("version") or d.version,
                    "server": data.get("server") or "",
                    "parameterization": data.get("parameterization")})
print(json.dumps(out))
`

// healthInterval is how often the engine is asked whether it is alive (upstream's 5 minutes).
const healthInterval = 5 * time.Minute

// programGrace is how long a program has after SIGINT before it is killed.
var programGrace = 10 * time.Second

// parentPoll is how often the host checks that the process that started it is alive.
var parentPoll = time.Second

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execPath      string
	// programs counts running programs, so that a stopping host lets them end first.
	programs sync.WaitGroup
}

func main() {
	// Flags the engine may pass to any plugin, and flags older engines passed to
	// the upstream Python host (options come from ProgramInfo now): accepted and
	// ignored. A private FlagSet, since imported packages register some of these
	// names on the global one.
	fs := flag.NewFlagSet("pulumi-language-python", flag.ExitOnError)
	for _, name := range []string{"logtostderr", "logflow"} {
		fs.Bool(name, false, "ignored")
	}
	fs.Int("v", 0, "ignored")
	for _, name := range []string{"tracing", "root", "virtualenv", "toolchain", "typechecker"} {
		fs.String(name, "", "ignored")
	}
	_ = fs.Parse(os.Args[1:])

	h := &host{execPath: execScriptPath()}
	if args := fs.Args(); len(args) > 0 {
		h.engineAddress = args[len(args)-1]
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancelCtx := context.WithCancel(ctx)
	defer cancelCtx()
	if h.engineAddress != "" {
		if err := rpcutil.Healthcheck(ctx, h.engineAddress, healthInterval, cancelCtx); err != nil {
			fmt.Fprintf(os.Stderr, "pulumi-language-python: health check: %v\n", err)
			os.Exit(1)
		}
	}
	go watchParent(ctx, os.Getppid(), parentPoll, cancelCtx)
	cancel := make(chan bool)
	go func() {
		<-ctx.Done()
		close(cancel)
	}()

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)
	err = <-handle.Done
	// Stopping cancelled every Run: let their programs take SIGINT and end.
	ended := make(chan struct{})
	go func() {
		h.programs.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(programGrace + time.Second):
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
}

// watchParent calls gone once the process that started this one has exited
// (this process is then re-parented, so its parent id changes).
func watchParent(ctx context.Context, parent int, every time.Duration, gone func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if os.Getppid() != parent {
				gone()
				return
			}
		}
	}
}

// interruptOnCancel makes a cancelled cmd (built with exec.CommandContext) get
// SIGINT, as upstream hosts send, then SIGKILL after programGrace.
func interruptOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = programGrace
}

// execScriptPath finds pulumi-language-python-exec beside this binary.
func execScriptPath() string {
	exe, err := os.Executable()
	if err == nil {
		if resolved, rerr := filepath.EvalSymlinks(exe); rerr == nil {
			exe = resolved
		}
		return filepath.Join(filepath.Dir(exe), "pulumi-language-python-exec")
	}
	return "pulumi-language-python-exec"
}

// resolveToolchain maps Pulumi.yaml's runtime options onto the SDK's toolchain package.
func resolveToolchain(info *pulumirpc.ProgramInfo) (toolchain.Toolchain, error) {
	if info == nil {
		return nil, errors.New("missing program info")
	}
	opts := toolchain.PythonOptions{
		Root:       info.GetRootDirectory(),
		ProgramDir: info.GetProgramDirectory(),
	}
	var raw map[string]any
	if info.GetOptions() != nil {
		raw = info.GetOptions().AsMap()
	}
	if v, ok := raw["virtualenv"].(string); ok {
		opts.Virtualenv = v
	}
	switch tc, _ := raw["toolchain"].(string); tc {
	case "", "auto":
		opts.Toolchain = toolchain.Auto
		if opts.Virtualenv != "" {
			opts.Toolchain = toolchain.Pip
		}
	case "pip":
		opts.Toolchain = toolchain.Pip
	case "poetry":
		opts.Toolchain = toolchain.Poetry
	case "uv":
		opts.Toolchain = toolchain.Uv
	default:
		return nil, fmt.Errorf("unsupported python toolchain %q (expected pip, poetry or uv)", tc)
	}
	return toolchain.ResolveToolchain(opts)
}

func typechecker(info *pulumirpc.ProgramInfo) string {
	if info == nil || info.GetOptions() == nil {
		return ""
	}
	tc, _ := info.GetOptions().AsMap()["typechecker"].(string)
	return tc
}

func (h *host) Handshake(
	_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

type pluginPackage struct {
	Name             string `json:"name"`
	Version          string `json:"version"`
	Server           string `json:"server"`
	Parameterization *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Value   string `json:"value"`
	} `json:"parameterization"`
}

// pluginPackages asks the program's interpreter which provider plugins its packages need.
func pluginPackages(ctx context.Context, info *pulumirpc.ProgramInfo) ([]pluginPackage, error) {
	tc, err := resolveToolchain(info)
	if err != nil {
		return nil, err
	}
	cmd, err := tc.Command(ctx, "-c", pluginScript)
	if err != nil {
		return nil, err
	}
	cmd.Dir = info.GetProgramDirectory()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing Pulumi plugins of the Python packages: %w: %s", err, stderr.String())
	}
	var pkgs []pluginPackage
	if err := json.Unmarshal(out, &pkgs); err != nil {
		return nil, fmt.Errorf("parsing plugin list: %w", err)
	}
	return pkgs, nil
}

func (h *host) GetRequiredPlugins(
	ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	pkgs, err := pluginPackages(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPluginsResponse{}
	for _, p := range pkgs {
		if p.Parameterization != nil {
			continue
		}
		resp.Plugins = append(resp.Plugins, &pulumirpc.PluginDependency{
			Name: p.Name, Kind: "resource", Version: p.Version, Server: p.Server,
		})
	}
	return resp, nil
}

func (h *host) GetRequiredPackages(
	ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	pkgs, err := pluginPackages(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPackagesResponse{}
	for _, p := range pkgs {
		dep := &pulumirpc.PackageDependency{
			Name: p.Name, Kind: "resource", Version: p.Version, Server: p.Server,
		}
		if p.Parameterization != nil {
			value, err := base64.StdEncoding.DecodeString(p.Parameterization.Value)
			if err != nil {
				return nil, fmt.Errorf("package %s: bad parameterization value: %w", p.Name, err)
			}
			dep.Parameterization = &pulumirpc.PackageParameterization{
				Name: p.Parameterization.Name, Version: p.Parameterization.Version, Value: value,
			}
		}
		resp.Packages = append(resp.Packages, dep)
	}
	return resp, nil
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	tc, err := resolveToolchain(info)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	if checker := typechecker(info); checker != "" {
		if checker != "mypy" && checker != "pyright" {
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("unsupported typechecker %q", checker)}, nil
		}
		cmd, err := tc.ModuleCommand(ctx, checker, info.GetProgramDirectory())
		if err != nil {
			return &pulumirpc.RunResponse{Error: err.Error()}, nil
		}
		cmd.Dir = info.GetProgramDirectory()
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("%s type checking failed: %v", checker, err)}, nil
		}
	}

	program := req.GetProgram()
	if program == "" {
		program = info.GetEntryPoint()
	}
	args := []string{
		"-u", h.execPath,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
	}
	if req.GetOrganization() != "" {
		args = append(args, "--organization", req.GetOrganization())
	}
	if root := info.GetRootDirectory(); root != "" {
		args = append(args, "--root_directory", root)
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretJSON))
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	interruptOnCancel(cmd)

	h.programs.Add(1)
	defer h.programs.Done()
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == bailExitCode {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode()),
			}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Problem executing program (could not run language executor): %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// streamWriter forwards dependency-installation output to the engine.
type streamWriter struct {
	send   func(*pulumirpc.InstallDependenciesResponse) error
	stderr bool
}

func (w *streamWriter) Write(p []byte) (int, error) {
	data := append([]byte(nil), p...)
	resp := &pulumirpc.InstallDependenciesResponse{Stdout: data}
	if w.stderr {
		resp = &pulumirpc.InstallDependenciesResponse{Stderr: data}
	}
	if err := w.send(resp); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *host) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest,
	server grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	ctx := server.Context()
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return err
	}
	var stdout, stderr io.Writer = &streamWriter{send: server.Send}, &streamWriter{send: server.Send, stderr: true}
	dir := req.GetInfo().GetProgramDirectory()
	if dir == "" {
		dir = req.GetDirectory()
	}
	useTools := req.GetUseLanguageVersionTools()
	if err := tc.EnsureVenv(ctx, dir, useTools, true, stdout, stderr); err != nil {
		return err
	}
	return tc.InstallDependencies(ctx, dir, useTools, true, stdout, stderr)
}

func (h *host) RuntimeOptionsPrompts(
	context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	about, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: about.PythonExecutable,
		Version:    about.PythonVersion.String(),
		Metadata:   map[string]string{"host": "frutebox-infra offline build"},
	}, nil
}

func (h *host) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, err := resolveToolchain(req.GetInfo())
	if err != nil {
		return nil, err
	}
	deps, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, d := range deps {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: d.Name, Version: d.Version})
	}
	return resp, nil
}

func (h *host) RunPlugin(
	*pulumirpc.RunPluginRequest, grpc.ServerStreamingServer[pulumirpc.RunPluginResponse],
) error {
	return status.Error(codes.Unimplemented,
		"running Python source plugins is not supported by the frutebox-infra offline language host")
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// Compile-time check that nothing above drifted from the generated interface.
var _ pulumirpc.LanguageRuntimeServer = (*host)(nil)
