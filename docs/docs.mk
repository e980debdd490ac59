EXTRA_DIST += docs/flow.md docs/architecture.md docs/operations.md docs/lodestone.conf.example docs/benchmarks.md
