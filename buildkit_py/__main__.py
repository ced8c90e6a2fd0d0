"""`python -m buildkit_py`: the command line (cli.main), as the buildkit-py script runs it."""

import sys

from .cli import main

sys.exit(main())
