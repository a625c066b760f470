"""The auditor's tools: export the log, verify it by replay, explain a job, look at a
past instant, and simulate a candidate configuration against recorded work.

Everything here works on envelopes (`Envelope`: seq, subject, events) from any
source and uses the real core; only `stream` and `export` touch NATS (the `bus`
extra), and they are imported on use.
"""

from quartermaster.audit.envelope import Envelope
from quartermaster.audit.errors import AuditError, PermanentAuditError, TransientAuditError
from quartermaster.audit.logfile import Format, read_log, write_log
from quartermaster.audit.verify import Difference, Report, Verifier, verify

__all__ = [
    "AuditError",
    "Difference",
    "Envelope",
    "Format",
    "PermanentAuditError",
    "Report",
    "TransientAuditError",
    "Verifier",
    "read_log",
    "verify",
    "write_log",
]
