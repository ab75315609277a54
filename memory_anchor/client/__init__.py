"""Talking to a running worker: the HTTP client, the branch API and the mem0-style SDK. No worker imports."""
