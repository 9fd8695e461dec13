"""Tools run by commands but not part of the composition root: the demo, simulated load, the
policy scorecard and its corpus, a private redis-server."""
