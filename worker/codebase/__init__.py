"""The code a memory is about: the git repository beside the project, read without touching the hook path."""
