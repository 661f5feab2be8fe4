"""``python -m capjudge.cli``."""

import sys

from capjudge.cli import main

sys.exit(main())
