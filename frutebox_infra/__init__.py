"""frutebox-infra: a stack's armed models become RunPod pods declared by a Pulumi program.

Bottom to top: `plumbing`, `catalog` (the registry's schema), `estimates` (fit and speed),
`recipes` (one per engine we serve), `stack` and `seeding`, `planner`, `deploy` (the requests
the deploy step reads), `views`, `report`; then the shells: `runpod` (the REST client and the
deploy step), `commands` (`frutebox`), `program` (the Pulumi program), and `emulator` (a local
RunPod for tests). `docs/architecture.md` draws the map."""
