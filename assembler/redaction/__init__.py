"""Redaction: the view allowed before commit, masked reproducers, reports, the naive-client lane."""
