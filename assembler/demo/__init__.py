"""Demos: built-in scenarios, their provider-exact wire bytes for the mock, a long stress stream."""
