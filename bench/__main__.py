"""`python -m bench` runs the speedbench command line."""

from bench.cli import main

raise SystemExit(main())
