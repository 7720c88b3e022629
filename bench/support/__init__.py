"""What the benches share: timing, tables, throwaway Pulumi projects and the results file
(`common`), and the deploy step run in-process against an emulator on a scaled clock
(`deploy`)."""
