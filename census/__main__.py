"""Run the bucket-key census: ``python -m census SRC [--json] [--all-layers]``."""

from census import main

raise SystemExit(main())
