"""What the user writes: the manifest (YAML with file/line errors) and where credentials come from."""
