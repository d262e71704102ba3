"""Run the migration: ``python -m migrate SRC.sqlite DEST [--dry-run] [--batch N] ...``."""

from migrate import main

raise SystemExit(main())
