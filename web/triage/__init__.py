"""Triage: bug-report captures in, stored sources, diagnoses of failed calls, exports, comparisons."""
