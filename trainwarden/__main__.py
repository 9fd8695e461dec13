import sys

from trainwarden.cli.entry import main

sys.exit(main())
