"""A caller: its subject, its roles, and the quota shares it is a member of."""

from __future__ import annotations

from enum import StrEnum

import msgspec


class Role(StrEnum):
    ADMIN = "admin"  # configuration, nodes, and everything a member may do on every share
    MEMBER = "member"  # the jobs (and their warm pools) of its quota shares
    AUDITOR = "auditor"  # reads everything, replays the log, writes nothing


class ShareRef(msgspec.Struct, frozen=True, order=True):
    """`QUEUE/SHARE`: one quota share of one job queue."""

    job_queue: str
    quota_share: str

    @classmethod
    def parse(cls, text: str) -> ShareRef:
        queue, sep, share = text.partition("/")
        if not sep or not queue or not share or "/" in share:
            raise ValueError(f"a share is QUEUE/SHARE, got {text!r}")
        return cls(queue, share)

    def __str__(self) -> str:
        return f"{self.job_queue}/{self.quota_share}"


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    subject: str
    roles: frozenset[Role] = frozenset()
    shares: frozenset[ShareRef] = frozenset()

    @property
    def is_admin(self) -> bool:
        return Role.ADMIN in self.roles

    def may_read_all(self) -> bool:
        return Role.ADMIN in self.roles or Role.AUDITOR in self.roles

    def member_of(self, job_queue: str, quota_share: str) -> bool:
        if self.is_admin:
            return True
        return Role.MEMBER in self.roles and ShareRef(job_queue, quota_share) in self.shares

    def member_queues(self) -> frozenset[str]:
        return (
            frozenset(s.job_queue for s in self.shares)
            if Role.MEMBER in self.roles
            else frozenset()
        )

    def reads_share(self, job_queue: str, quota_share: str) -> bool:
        """May see this share's jobs: admins and auditors see all, members their own."""
        return self.may_read_all() or self.member_of(job_queue, quota_share)
