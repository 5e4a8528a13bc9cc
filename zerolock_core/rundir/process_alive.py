"""Whether a process id belongs to a running process: what tells a held lock or a folder named by its
owner's pid from one a killed process left behind."""
from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """True for this process and for any running one (another user's too); False for no process, and for
    what is not a process id at all (0 and negatives would name process groups to os.kill)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except (OverflowError, OSError):
        return False
    return True
