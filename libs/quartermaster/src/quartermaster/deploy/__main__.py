"""`python -m quartermaster.deploy bootstrap ...`: `qm deploy bootstrap` where the image
has the library but not the client's extras (the service images)."""

import sys

from quartermaster.deploy.command import main

sys.exit(main())
