"""Launching and stopping runs: on this host in tmux, or on GPU servers over SSH (servers, experiments, plans)."""
