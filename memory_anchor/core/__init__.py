"""The ground floor: paths, settings, version, processes, projects, redaction, the Claude Code facts and the worker's lifecycle. Standard library only."""
