"""Quartermaster shared libraries: events, the pure scheduling core, adapters, SDK."""
