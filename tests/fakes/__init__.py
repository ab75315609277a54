"""Test doubles that are real servers: the fake Anthropic Messages API."""
