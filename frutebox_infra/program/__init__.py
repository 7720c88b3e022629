"""The Pulumi program's shell: the one module that declares resources from a plan (the weights
volume, one pod per armed model or shared pod, seed pods), and its quiet answer to Ctrl-C."""
