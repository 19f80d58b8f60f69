"""Training from people's data: background training jobs of the app and the world study (the
simulated annotators rating through the same queue)."""
