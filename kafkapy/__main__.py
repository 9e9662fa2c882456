"""`python -m kafkapy` runs the kafkapy command line."""
from .cli import main

raise SystemExit(main())
