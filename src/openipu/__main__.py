"""`python -m openipu` runs the `openipu` command."""

import sys

from openipu.cli import main

sys.exit(main())
