EXTRA_DIST += docs/architecture.md docs/flow.md docs/operations.md docs/lodestone.conf.example docs/benchmarks.md
