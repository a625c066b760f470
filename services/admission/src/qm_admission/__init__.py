"""Quartermaster admission: the gRPC front door.

Validates requests against the folded state, appends them to the event log
(`<prefix>.requests`) and serves reads from the Postgres read model.
"""
