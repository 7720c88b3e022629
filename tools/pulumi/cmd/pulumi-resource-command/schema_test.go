package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noPackages is a loader for a schema that references no other package.
type noPackages struct{}

func (noPackages) LoadPackage(string, *semver.Version) (*schema.Package, error) {
	return nil, errors.New("the command schema must not reference other packages")
}

func (noPackages) LoadPackageV2(context.Context, *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, errors.New("the command schema must not reference other packages")
}

// The schema binds with the CLI's own schema package, and describes what the
// provider implements: import's code generation looks resources up in it.
func TestTheSchemaBindsAndDescribesTheCommand(t *testing.T) {
	text, err := schemaJSON()
	if err != nil {
		t.Fatal(err)
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(text), &spec); err != nil {
		t.Fatal(err)
	}
	pkg, diags, err := schema.BindSpec(spec, noPackages{}, schema.ValidationOptions{})
	if err != nil || diags.HasErrors() {
		t.Fatalf("binding: %v %v", err, diags)
	}
	res, ok := pkg.GetResource(commandType)
	if !ok {
		t.Fatalf("%s missing", commandType)
	}
	for _, k := range inputKeys {
		found := false
		for _, p := range res.InputProperties {
			found = found || p.Name == string(k)
		}
		if !found {
			t.Errorf("input %s missing from the schema", k)
		}
	}
	if _, ok := pkg.GetFunction(runToken); !ok {
		t.Errorf("%s missing", runToken)
	}
	if pkg.Version == nil || pkg.Version.String() != providerVersion {
		t.Errorf("version %v", pkg.Version)
	}
}
