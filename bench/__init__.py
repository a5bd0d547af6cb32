"""The benchmark harness: retrieval quality, latency, index and load runs (``python -m bench.run``)."""
