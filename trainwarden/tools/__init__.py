"""Tools the commands run that are not the composition root's wiring: the demo and its stand-in trainer, a
private redis-server, simulated load, the policy scorecard and its corpus of labelled runs."""
