"""The command shells: `frutebox` and its sub-commands, and the I/O each needs (RunPod reads
for status, prices and preview's live look, git for diffs, the emulator rehearsal, the hermetic
Pulumi toolchain). The pure layers below do the thinking."""
