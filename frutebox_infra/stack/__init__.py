"""One stack's inputs: every `frutebox-infra:*` key with its type, default and fix, the stack
file read as Pulumi reads it, what the process environment contributes, and which RunPod API
and key a command uses."""
