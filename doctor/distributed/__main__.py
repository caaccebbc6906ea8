"""`torchrun ... -m doctor.distributed` / `srun python -m doctor.distributed`: one rank's check."""

import sys

from doctor.distributed.entry import main

sys.exit(main())
