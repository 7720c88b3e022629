"""The planner: a stack's settings and the catalog become a fleet plan. Per model the
resolver picks an engine and renders its pods; the count search and ranking find the cheapest
placements that fit; the floor drops those too slow per stream; co-location shares pods; every
launch is checked against its engine's options; seeding decides which weights a CPU pod puts on
the volume first. Pure: no I/O, no Pulumi."""
