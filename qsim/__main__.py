"""``python -m qsim`` is the ``qsim`` command."""

import sys

from qsim.cli import main

sys.exit(main())
