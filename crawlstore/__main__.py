"""``python -m crawlstore``: the ``crawlstore`` command."""

import sys

from .cli import main

sys.exit(main())
