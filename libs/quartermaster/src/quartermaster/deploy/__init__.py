"""Deploying on many hosts: the one-shot bootstrap that secures compose and Kubernetes."""
