EXTRA_DIST += docs/architecture.md docs/operations.md docs/lodestone.conf.example docs/benchmarks.md docs/flow.md
