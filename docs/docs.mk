EXTRA_DIST += docs/architecture.md docs/lodestone.conf.example docs/benchmarks.md
