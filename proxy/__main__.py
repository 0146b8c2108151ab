"""`python -m proxy` runs the `latchgate` command."""

import sys

from proxy.cli.main import main

sys.exit(main())
