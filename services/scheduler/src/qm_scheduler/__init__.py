"""The scheduler service: one active leader per job queue, standbys waiting."""
