"""`python -m frutebox_infra`: the same command line as `frutebox`."""

import sys

from frutebox_infra.commands.cli import main

sys.exit(main())
