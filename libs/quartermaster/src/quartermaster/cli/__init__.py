"""The `qm` command line: every RPC over the Python client, plus `qm up` and `qm demo`."""
