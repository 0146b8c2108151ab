"""`python -m proxy` runs the `latchgate` command."""

import sys

from .cli import main

sys.exit(main())
