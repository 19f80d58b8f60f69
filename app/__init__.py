"""CapLens Gradio app and the `caplens` command line."""
