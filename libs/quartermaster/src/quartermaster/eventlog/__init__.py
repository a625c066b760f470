"""The event log as the services use it: envelopes, subjects and the folding follower."""

from quartermaster.eventlog import subjects
from quartermaster.eventlog.envelope import decode_batch, encode_batch
from quartermaster.eventlog.follower import LogFollower

__all__ = ["LogFollower", "decode_batch", "encode_batch", "subjects"]
