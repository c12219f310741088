"""Programs over a whole store that a storage runs in a child process (a file's migration)."""
