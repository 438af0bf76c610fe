"""The coordinator: a request's run, its plan, its page tasks and its progress events."""
