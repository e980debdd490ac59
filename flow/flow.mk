# flow/: see docs/architecture.md and Makefile.am for the variables fragments append to.
