package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// GenerateProgram turns a PCL program into Python, as `pulumi import` asks
// for to print the code of what it adopted. The CLI's own Python code
// generator (pkg/v3/codegen/python) does the work, with the package schemas
// the engine's loader serves.
func (h *host) GenerateProgram(
	_ context.Context, req *pulumirpc.GenerateProgramRequest,
) (*pulumirpc.GenerateProgramResponse, error) {
	loader, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	dir, err := os.MkdirTemp("", "pulumi-generate-program-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, text := range req.GetSource() {
		if filepath.Base(name) != name {
			return nil, fmt.Errorf("program file %q: a plain file name was expected", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	opts := []pcl.BindOption{pcl.PreferOutputVersionedInvokes}
	if !req.GetStrict() {
		opts = append(opts, pcl.NonStrictBindOptions()...)
	}
	program, diags, err := pcl.BindDirectory(dir, schema.NewCachedLoader(loader), opts...)
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GenerateProgramResponse{Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags)}
	if diags.HasErrors() {
		return resp, nil
	}
	files, genDiags, err := python.GenerateProgram(program)
	if err != nil {
		return nil, err
	}
	resp.Diagnostics = append(resp.Diagnostics, plugin.HclDiagnosticsToRPCDiagnostics(genDiags)...)
	resp.Source = files
	return resp, nil
}
