import sys

from trainwarden.cli import main

sys.exit(main())
