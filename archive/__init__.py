"""Archiving: a run's log head into verified JSONL files, then trimmed; reading archives back with the stream."""
