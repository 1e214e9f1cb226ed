"""The GitHub side: the REST API client and the Action's step."""
