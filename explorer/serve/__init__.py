"""Serving past one process: replicas behind nginx (``python -m explorer.serve``, ``scripts/serve.sh``)."""
