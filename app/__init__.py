"""ZeroLock dashboard: a Gradio app over the engine's `Run` API, and plotly figure builders.

`app.figures` imports only plotly and the engine's pure-Python schedule package, so notebooks can
use the same timelines and memory charts without Gradio.
"""
