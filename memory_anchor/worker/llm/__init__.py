"""The door to Claude.

Which route reaches it (an API key, the user's Claude Code login, or none), the
`claude` CLI in headless mode, and the client that applies retries and the
daily budget. Callers get a client passed in; none builds its own.

Layer rule (docs/architecture.md): may import store/.
"""
