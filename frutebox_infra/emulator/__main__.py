"""`python -m frutebox_infra.emulator`: the same as `frutebox emulator`."""

import sys

from frutebox_infra.emulator.server import main

sys.exit(main())
