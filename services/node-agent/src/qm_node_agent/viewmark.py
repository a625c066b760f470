"""How new a host view must be for a restarted agent to act on it.

The feed may hold an older view of this host than the newest one its agent acted on: each
view goes out at once, unstored, and is stored on the feed after (for a busy host, its
newest view up to a fraction of a second later, `host_relay.STORE_EVERY_S`). An agent
restarted in between that applied the stored view would stop an attempt it runs (the
older view does not know it yet) or launch again one whose record it had dropped (the
older view still wants it). So it reads views only from the newest position it acted on:
the position each attempt was launched from (its record's `view_seq`) and the one it
dropped a record at (this mark, written before the record goes). Until a view that new
comes, its host has nothing to do: it starts, stops and forgets nothing.

Written whole, not synced: an agent's crash keeps what it wrote (the page cache), and a
host's crash takes its jobs down with it.
"""

from __future__ import annotations

from pathlib import Path

from quartermaster.files import write_whole


class ViewMark:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = _read(path)

    def advance(self, seq: int) -> None:
        """Note that this host acted on the view at `seq` (no-op if not newer)."""
        if seq > self.seq:
            write_whole(self.path, f"{seq}\n")
            self.seq = seq


def _read(path: Path) -> int:
    try:
        return max(0, int(path.read_text().strip() or 0))
    except (OSError, ValueError):  # none yet, or unreadable: as before the mark existed
        return 0
