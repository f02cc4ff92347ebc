"""The fabric as values: topology, paths, placement. Pure; discovery and polling are shell."""
