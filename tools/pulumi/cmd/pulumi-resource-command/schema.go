package main

import (
	"encoding/json"
	"fmt"
)

// schemaJSON is the package schema: the shapes of command:local:Command and
// command:local:run that this provider implements, so that the CLI can bind
// and generate code for them (`pulumi import` prints the adopted resource's
// code from it). Written for this provider; the shapes are the public ones of
// pulumi-command 1.2.1, which programs already use.
func schemaJSON() (string, error) {
	str := map[string]any{"type": "string"}
	strList := map[string]any{"type": "array", "items": str}
	common := map[string]any{
		"addPreviousOutputInEnv": map[string]any{"type": "boolean",
			"description": "Pass the previous stdout/stderr to update and delete (default true)."},
		"archivePaths": withDesc(strList, "Globs of files to return as one archive."),
		"assetPaths":   withDesc(strList, "Globs of files to return as assets."),
		"dir":          withDesc(str, "Working directory of the command."),
		"environment": map[string]any{"type": "object", "additionalProperties": str,
			"description": "Extra environment variables."},
		"interpreter": withDesc(strList, `The interpreter and its flags (default ["/bin/sh", "-c"]).`),
		"logging":     map[string]any{"$ref": "#/types/command:local:Logging"},
		"stdin":       withDesc(str, "Text passed to the command's standard input."),
	}
	inputs := copyMap(common)
	inputs["create"] = withDesc(str, "Run on create, and on update when update is unset.")
	inputs["update"] = withDesc(str, "Run on update.")
	inputs["delete"] = withDesc(str, "Run on delete.")
	inputs["triggers"] = map[string]any{"type": "array", "items": map[string]any{"$ref": "pulumi.json#/Any"},
		"replaceOnChanges": true, "description": "Any change replaces the resource."}
	outputs := copyMap(inputs)
	outputs["stdout"] = withDesc(str, "The command's standard output.")
	outputs["stderr"] = withDesc(str, "The command's standard error.")
	outputs["archive"] = map[string]any{"$ref": "pulumi.json#/Archive"}
	outputs["assets"] = map[string]any{"type": "object",
		"additionalProperties": map[string]any{"$ref": "pulumi.json#/Asset"}}
	runInputs := copyMap(common)
	runInputs["command"] = withDesc(str, "The command to run.")
	runOutputs := copyMap(runInputs)
	runOutputs["stdout"], runOutputs["stderr"] = outputs["stdout"], outputs["stderr"]
	runOutputs["archive"], runOutputs["assets"] = outputs["archive"], outputs["assets"]

	var levels []map[string]any
	for _, v := range []string{"stdout", "stderr", "stdoutAndStderr", "none"} {
		levels = append(levels, map[string]any{"value": v})
	}
	doc := map[string]any{
		"name":    "command",
		"version": providerVersion,
		"meta":    map[string]any{"moduleFormat": "(.*)"},
		"types": map[string]any{
			"command:local:Logging": map[string]any{"type": "string", "enum": levels},
		},
		"resources": map[string]any{
			commandType: map[string]any{
				"description":     "Runs commands on the machine running Pulumi.",
				"inputProperties": inputs,
				"properties":      outputs,
				"required":        []string{"stdout", "stderr"},
			},
		},
		"functions": map[string]any{
			runToken: map[string]any{
				"inputs":  map[string]any{"properties": runInputs, "required": []string{"command"}},
				"outputs": map[string]any{"properties": runOutputs, "required": []string{"command", "stdout", "stderr"}},
			},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding the schema: %w", err)
	}
	return string(b), nil
}

func withDesc(m map[string]any, desc string) map[string]any {
	out := copyMap(m)
	out["description"] = desc
	return out
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
