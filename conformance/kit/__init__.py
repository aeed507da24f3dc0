"""The conformance kit's runner (run.py): daemons, adapters, vectors, scenarios."""
